"""tf.data.Dataset over the runtime's dataset ops (src/kernels/data): each
Dataset here is a description; its ops are added to a graph when an
iterator is made, and the elements are produced by C++ on the task that
runs those ops, never by Python per element."""
import numpy as np

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.data import structure as _nest

AUTOTUNE = -1


def _i64(value, name):
    """An int64 scalar input from a Python int or an integer Tensor."""
    if isinstance(value, _fw.Tensor):
        if value.dtype == _dtypes.int64:
            return value
        if value.dtype == _dtypes.int32:
            return _raw.Cast(x=value, DstT=_dtypes.int64)
        raise TypeError(f"'{name}' must be an integer, got a {value.dtype.name} tensor")
    return _fw.constant(int(value), dtype=_dtypes.int64)


def _bool(value):
    return value if isinstance(value, _fw.Tensor) else _fw.constant(bool(value), dtype=_dtypes.bool)


def _dims(shape):
    """A partial shape as a list of ints and Nones, or None (unknown rank)."""
    if shape is None:
        return None
    if isinstance(shape, _fw.TensorShape):
        return None if shape._dims is None else list(shape._dims)
    return [None if d is None or (isinstance(d, int) and d < 0) else int(d) for d in shape]


def _shape(dims):
    return _fw.TensorShape(dims)


class Dataset:
    """A sequence of elements, each a structure of tensors (tf.data.Dataset).

    Subclasses give the element's structure (`_types`, `_shapes`: the same
    structure with DType and TensorShape leaves) and `_build(graph)`, which
    adds the dataset's op to the default graph and returns its handle."""

    def __init__(self, types, shapes):
        self._types, self._shapes = types, shapes
        self._handles = {}  # graph -> the handle Tensor built in it

    # ---- the element's structure -------------------------------------------
    @property
    def output_types(self):
        return self._types

    @property
    def output_shapes(self):
        return self._shapes

    @property
    def output_classes(self):
        return _nest.map_structure(lambda _: _fw.Tensor, self._types)

    def _flat_types(self):
        return _nest.flatten(self._types)

    def _flat_shapes(self):
        return [_dims(s) for s in _nest.flatten(self._shapes)]

    def _handle(self):
        g = _fw.get_default_graph()
        if g not in self._handles:
            self._handles[g] = self._build()
        return self._handles[g]

    def _build(self):
        raise NotImplementedError

    # ---- sources --------------------------------------------------------------
    @staticmethod
    def from_tensors(tensors):
        return _TensorsDataset(tensors, slices=False)

    @staticmethod
    def from_tensor_slices(tensors):
        return _TensorsDataset(tensors, slices=True)

    @staticmethod
    def range(*args):
        return _RangeDataset(*args)

    @staticmethod
    def zip(datasets):
        return _ZipDataset(datasets)

    @staticmethod
    def from_generator(generator, output_types, output_shapes=None, args=None, max_elements=1 << 20):
        """The generator's elements. distflow has no op that calls back into
        Python, so the generator runs once, here, to its end (at most
        `max_elements` elements, else an error), and its elements become a
        from_tensor_slices dataset (each component stacked; elements of a
        component must share a shape). An endless generator is an error."""
        return _generated(generator, output_types, output_shapes, args, max_elements)

    # ---- transformations ---------------------------------------------------
    def batch(self, batch_size, drop_remainder=False):
        return _BatchDataset(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size, padded_shapes, padding_values=None, drop_remainder=False):
        return _BatchDataset(self, batch_size, drop_remainder, padded_shapes, padding_values)

    def repeat(self, count=None):
        return _UnaryDataset(self, "RepeatDataset", count=-1 if count is None else count)

    def take(self, count):
        return _UnaryDataset(self, "TakeDataset", count=count)

    def skip(self, count):
        return _UnaryDataset(self, "SkipDataset", count=count)

    def shard(self, num_shards, index):
        return _UnaryDataset(self, "ShardDataset", num_shards=num_shards, index=index)

    def prefetch(self, buffer_size):
        return _UnaryDataset(self, "PrefetchDataset", buffer_size=buffer_size)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=None):
        return _ShuffleDataset(self, buffer_size, seed, True if reshuffle_each_iteration is None
                               else reshuffle_each_iteration)

    def cache(self, filename=""):
        return _CacheDataset(self, filename)

    def concatenate(self, dataset):
        return _ConcatenateDataset(self, dataset)

    def map(self, map_func, num_parallel_calls=None):
        from distflow.data import functions
        return functions.MapDataset(self, map_func, num_parallel_calls)

    def filter(self, predicate):
        from distflow.data import functions
        return functions.FilterDataset(self, predicate)

    def flat_map(self, map_func):
        from distflow.data import functions
        return functions.FlatMapDataset(self, map_func)

    def interleave(self, map_func, cycle_length=AUTOTUNE, block_length=1, num_parallel_calls=None):
        """num_parallel_calls is accepted and the elements come in the same
        order as without it (TF's deterministic order); the inner datasets
        are read on the iterator's thread."""
        from distflow.data import functions
        return functions.InterleaveDataset(self, map_func, cycle_length, block_length)

    def apply(self, transformation_func):
        return transformation_func(self)

    # ---- iterators ------------------------------------------------------------
    def make_one_shot_iterator(self):
        from distflow.data import iterator_ops
        return iterator_ops.Iterator._one_shot(self)

    def make_initializable_iterator(self, shared_name=None):
        from distflow.data import iterator_ops
        it = iterator_ops.Iterator.from_structure(self._types, self._shapes, shared_name=shared_name)
        it._initializer = it.make_initializer(self)
        return it

    def __iter__(self):
        raise TypeError("A tf.data.Dataset is iterated by an iterator in graph mode: "
                        "dataset.make_one_shot_iterator().get_next()")


DatasetV1 = Dataset


class _TensorsDataset(Dataset):
    def __init__(self, tensors, slices):
        self._structure = tensors
        flat = _nest.flatten(tensors)
        if not flat:
            raise ValueError("A dataset needs at least one component")
        self._values = [v if isinstance(v, _fw.Tensor) else np.asarray(v) for v in flat]
        self._slices = slices
        types, shapes = [], []
        rows = None
        for i, v in enumerate(self._values):
            if isinstance(v, _fw.Tensor):
                dt, dims = v.dtype, _dims(v.shape)
            else:
                dt = _fw._infer_dtype(flat[i]) if not isinstance(flat[i], np.ndarray) else \
                    (_dtypes.string if v.dtype.kind in "USO" else _dtypes.as_dtype(v.dtype))
                dims = list(v.shape)
            if slices:
                if dims is not None and not dims:
                    raise ValueError(f"Dataset.from_tensor_slices: component {i} is a scalar: it has no rows to slice")
                if dims is not None and dims[0] is not None:
                    if rows is not None and dims[0] != rows:
                        raise ValueError(f"Dataset.from_tensor_slices: components have different numbers of rows: "
                                         f"{rows} before component {i}, which has {dims[0]} (shape {dims})")
                    rows = dims[0]
                dims = None if dims is None else dims[1:]
            types.append(dt)
            shapes.append(_shape(dims))
        super().__init__(_nest.pack(tensors, types), _nest.pack(tensors, shapes))

    def _build(self):
        comps = [v if isinstance(v, _fw.Tensor) else _fw.convert_to_tensor(v, dtype=t)
                 for v, t in zip(self._values, self._flat_types())]
        op = _raw.TensorSliceDataset if self._slices else _raw.TensorDataset
        return op(components=comps)


class _RangeDataset(Dataset):
    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"Dataset.range takes 1 to 3 arguments (start, stop, step), got {len(args)}")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        self._args = (start, stop, step)
        super().__init__(_dtypes.int64, _shape([]))

    def _build(self):
        start, stop, step = self._args
        return _raw.RangeDataset(start=_i64(start, "start"), stop=_i64(stop, "stop"), step=_i64(step, "step"))


class _UnaryDataset(Dataset):
    """A transformation by an op taking the input and integer scalars."""

    def __init__(self, input_dataset, op, types=None, shapes=None, **ints):
        self._input, self._op, self._ints = input_dataset, op, ints
        super().__init__(input_dataset._types if types is None else types,
                         input_dataset._shapes if shapes is None else shapes)

    def _build(self):
        args = {k: _i64(v, k) for k, v in self._ints.items()}
        return getattr(_raw, self._op)(input_dataset=self._input._handle(), **args)


class _ShuffleDataset(_UnaryDataset):
    def __init__(self, input_dataset, buffer_size, seed, reshuffle):
        super().__init__(input_dataset, "ShuffleDataset", buffer_size=buffer_size)
        self._seed, self._reshuffle = seed, reshuffle

    def _build(self):
        g = _fw.get_default_graph()
        seed, seed2 = (0, 0)
        if self._seed is not None or g.seed is not None:
            seed = g.seed if g.seed is not None else 87654321
            seed2 = self._seed if self._seed is not None else g._last_id
        return _raw.ShuffleDataset(input_dataset=self._input._handle(), buffer_size=_i64(self._ints["buffer_size"], "buffer_size"),
                                   seed=_i64(seed, "seed"), seed2=_i64(seed2, "seed2"),
                                   reshuffle_each_iteration=bool(self._reshuffle))


class _CacheDataset(_UnaryDataset):
    def __init__(self, input_dataset, filename):
        super().__init__(input_dataset, "CacheDataset")
        self._filename = filename

    def _build(self):
        return _raw.CacheDataset(input_dataset=self._input._handle(),
                                 filename=_fw.constant(self._filename or "", dtype=_dtypes.string))


class _BatchDataset(Dataset):
    def __init__(self, input_dataset, batch_size, drop_remainder, padded_shapes=None, padding_values=None):
        self._input, self._size, self._drop = input_dataset, batch_size, drop_remainder
        static = batch_size if isinstance(batch_size, int) and drop_remainder is True else None
        self._padded = None
        if padded_shapes is not None:
            padded = _nest.map_structure(lambda s: _dims(s), _as_structure_of_shapes(padded_shapes, input_dataset))
            self._padded = [[-1 if d is None else d for d in p] for p in _nest.flatten(padded)]
            if padding_values is None:
                values = [np.zeros((), t.as_numpy_dtype) if t != _dtypes.string else b""
                          for t in input_dataset._flat_types()]
            else:
                values = _nest.flatten(padding_values)
                if len(values) != len(self._padded):
                    raise ValueError("padded_batch: padding_values must have the structure of the dataset's elements")
            self._values = values
            shapes = _nest.pack(input_dataset._types, [_shape([static] + [None if d < 0 else d for d in p])
                                                       for p in self._padded])
        else:
            shapes = _nest.map_structure(
                lambda s: _shape(None if _dims(s) is None else [static] + _dims(s)), input_dataset._shapes)
        super().__init__(input_dataset._types, shapes)

    def _build(self):
        size = _i64(self._size, "batch_size")
        drop = _bool(self._drop)
        if self._padded is None:
            return _raw.BatchDataset(input_dataset=self._input._handle(), batch_size=size, drop_remainder=drop)
        shapes = [_fw.constant(np.asarray(p, np.int64), dtype=_dtypes.int64) for p in self._padded]
        values = [v if isinstance(v, _fw.Tensor) else _fw.convert_to_tensor(v, dtype=t)
                  for v, t in zip(self._values, self._input._flat_types())]
        return _raw.PaddedBatchDataset(input_dataset=self._input._handle(), batch_size=size, padded_shapes=shapes,
                                       padding_values=values, drop_remainder=drop, N=len(shapes),
                                       Toutput_types=[v.dtype for v in values])


def _as_structure_of_shapes(padded_shapes, dataset):
    """padded_shapes with TensorShape/list leaves, in the dataset's structure."""
    types = dataset._types
    if not isinstance(types, (tuple, dict)):
        return padded_shapes
    if isinstance(types, dict):
        return {k: padded_shapes[k] for k in types}
    return tuple(padded_shapes)


class _ZipDataset(Dataset):
    def __init__(self, datasets):
        self._datasets = datasets
        flat = _nest.flatten(datasets)
        for d in flat:
            if not isinstance(d, Dataset):
                raise TypeError(f"Dataset.zip takes a structure of datasets, got a {type(d).__name__}")
        self._flat = flat
        super().__init__(_nest.pack(datasets, [d._types for d in flat]), _nest.pack(datasets, [d._shapes for d in flat]))

    def _build(self):
        return _raw.ZipDataset(input_datasets=[d._handle() for d in self._flat], N=len(self._flat))


class _ConcatenateDataset(Dataset):
    def __init__(self, a, b):
        if a._flat_types() != b._flat_types():
            raise TypeError(f"Dataset.concatenate: the elements' types differ: {a._types} and {b._types}")
        self._a, self._b = a, b
        shapes = [_shape(None if x is None or y is None or len(x) != len(y) else
                         [d if d == e else None for d, e in zip(x, y)])
                  for x, y in zip(a._flat_shapes(), b._flat_shapes())]
        super().__init__(a._types, _nest.pack(a._types, shapes))

    def _build(self):
        return _raw.ConcatenateDataset(input_dataset=self._a._handle(), another_dataset=self._b._handle())


def _generated(generator, output_types, output_shapes, args, max_elements):
    types = _nest.map_structure(_dtypes.as_dtype, output_types)
    flat_types = _nest.flatten(types)
    columns = [[] for _ in flat_types]
    n = 0
    for element in generator(*(args or ())):
        if n >= max_elements:
            raise ValueError(f"Dataset.from_generator: the generator gave more than {max_elements} elements; "
                             f"distflow runs it to its end when the dataset is made (there is no Python "
                             f"callback op), so it must be finite")
        if not isinstance(types, (tuple, dict)):
            element = (element,)
            flat = list(element)
        else:
            _nest.assert_same_structure(types, element if isinstance(element, (tuple, dict)) else tuple(element),
                                        f"Dataset.from_generator: element {n}")
            flat = _nest.flatten(element if isinstance(element, (tuple, dict)) else tuple(element))
        if len(flat) != len(flat_types):
            raise ValueError(f"Dataset.from_generator: element {n} has {len(flat)} components, "
                             f"output_types has {len(flat_types)}")
        for c, (v, t) in enumerate(zip(flat, flat_types)):
            a = np.asarray(v, dtype=object if t == _dtypes.string else t.as_numpy_dtype)
            if columns[c] and a.shape != columns[c][0].shape:
                raise ValueError(f"Dataset.from_generator: component {c} of element {n} has shape {a.shape}, "
                                 f"element 0's has {columns[c][0].shape}; distflow stacks the elements, so "
                                 f"their shapes must agree")
            columns[c].append(a)
        n += 1
    if n == 0:
        raise ValueError("Dataset.from_generator: the generator gave no elements")
    stacked = [np.stack(col) for col in columns]
    ds = Dataset.from_tensor_slices(_nest.pack(types, stacked))
    if output_shapes is not None:
        declared = _nest.map_structure(lambda s: _dims(s), output_shapes) if isinstance(types, (tuple, dict)) \
            else _dims(output_shapes)
        for c, (want, got) in enumerate(zip(_nest.flatten(declared) if isinstance(types, (tuple, dict))
                                            else [declared], ds._flat_shapes())):
            if want is not None and (len(want) != len(got) or any(w is not None and w != g
                                                                  for w, g in zip(want, got))):
                raise ValueError(f"Dataset.from_generator: component {c} has shape {got}, "
                                 f"output_shapes says {want}")
    return ds
