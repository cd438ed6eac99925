"""Dataset transformations that run a Python function per element, traced
once into a graph function (distflow/function.py) that the runtime runs
per element (MapDataset, FilterDataset in src/kernels/data): map (with
num_parallel_calls), filter and flat_map. As in TF, a tuple
element is passed as separate arguments, anything else as one."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import function as _function
from distflow import raw_ops as _raw
from distflow.data import dataset_ops as _ds
from distflow.data import structure as _nest


def _trace(dataset, fn, what):
    template = dataset._types

    def call_args(flat):
        element = _nest.pack(template, flat)
        return element if isinstance(element, tuple) and not hasattr(element, "_fields") else (element,)

    return _function.TracedFunction(fn, dataset._flat_types(), dataset._flat_shapes(), call_args=call_args,
                                    what=what)


class MapDataset(_ds.Dataset):
    def __init__(self, input_dataset, map_func, num_parallel_calls=None):
        self._input = input_dataset
        self._fn = _trace(input_dataset, map_func, "Dataset.map")
        self._parallel = 1 if num_parallel_calls is None else num_parallel_calls
        structure = self._fn.structure
        super().__init__(_nest.pack(structure, self._fn.output_types),
                         _nest.pack(structure, [_fw.TensorShape(s._dims) for s in self._fn.output_shapes]))

    def _build(self):
        return _raw.MapDataset(input_dataset=self._input._handle(),
                               num_parallel_calls=_ds._i64(self._parallel, "num_parallel_calls"),
                               f=self._fn.definition)


class FilterDataset(_ds.Dataset):
    def __init__(self, input_dataset, predicate):
        self._input = input_dataset
        self._fn = _trace(input_dataset, predicate, "Dataset.filter")
        out = self._fn.outputs
        if len(out) != 1 or out[0].dtype != _dtypes.bool or (out[0].shape._dims not in (None, [])):
            raise TypeError(f"Dataset.filter: the predicate must return one scalar bool tensor, got "
                            f"{[(o.dtype.name, o.shape) for o in out]}")
        super().__init__(input_dataset._types, input_dataset._shapes)

    def _build(self):
        return _raw.FilterDataset(input_dataset=self._input._handle(), f=self._fn.definition)


class FlatMapDataset(_ds.Dataset):
    """The concatenation of the datasets `map_func` makes from each element.
    Its body builds the inner dataset's ops; they run once per element, one
    element at a time."""

    def __init__(self, input_dataset, map_func):
        self._input = input_dataset
        made = {}

        def body(*args):
            inner = map_func(*args)
            if not isinstance(inner, _ds.Dataset):
                raise TypeError(f"Dataset.flat_map: the function must return a Dataset, got {type(inner).__name__}")
            made["dataset"] = inner
            return inner._handle()

        self._fn = _trace(input_dataset, body, "Dataset.flat_map")
        inner = made["dataset"]
        super().__init__(inner._types, inner._shapes)

    def _build(self):
        return _raw.FlatMapDataset(input_dataset=self._input._handle(), f=self._fn.definition,
                                   output_types=self._flat_types())
