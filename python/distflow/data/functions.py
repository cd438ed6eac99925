"""Dataset transformations that run a Python function per element, traced
once into a graph function (distflow/function.py) that the runtime runs
per element (MapDataset, FilterDataset in src/kernels/data): map (with
num_parallel_calls), filter, flat_map and interleave. As in TF, a tuple
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

    def __init__(self, input_dataset, map_func, what="Dataset.flat_map"):
        self._input = input_dataset
        made = {}

        def body(*args):
            inner = map_func(*args)
            if not isinstance(inner, _ds.Dataset):
                raise TypeError(f"{what}: the function must return a Dataset, got {type(inner).__name__}")
            made["dataset"] = inner
            return inner._handle()

        self._fn = _trace(input_dataset, body, what)
        inner = made["dataset"]
        super().__init__(inner._types, inner._shapes)

    def _build(self):
        return _raw.FlatMapDataset(input_dataset=self._input._handle(), f=self._fn.definition,
                                   output_types=self._flat_types())


class InterleaveDataset(FlatMapDataset):
    """`cycle_length` of the datasets `map_func` makes read at once,
    `block_length` elements from each in turn, in TensorFlow's order."""

    def __init__(self, input_dataset, map_func, cycle_length, block_length):
        if cycle_length is None or cycle_length == _ds.AUTOTUNE:
            import os
            cycle_length = len(os.sched_getaffinity(0))  # TF's AUTOTUNE: the cores this process may use
        for name, v in (("cycle_length", cycle_length), ("block_length", block_length)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Dataset.interleave: {name} must be a positive int, got {v!r}")
        self._cycle, self._block = cycle_length, block_length
        super().__init__(input_dataset, map_func, "Dataset.interleave")

    def _build(self):
        return _raw.InterleaveDataset(input_dataset=self._input._handle(),
                                      cycle_length=_ds._i64(self._cycle, "cycle_length"),
                                      block_length=_ds._i64(self._block, "block_length"),
                                      f=self._fn.definition, output_types=self._flat_types())
