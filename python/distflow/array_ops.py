"""TensorFlow 1.x's array functions (tf.reshape, tf.concat, tf.stack,
tf.squeeze, tf.one_hot, tf.where, ...), each a thin layer over registered
ops with TF1's argument order and keywords."""
import builtins as _builtins

import numpy as _np

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw

convert_to_tensor = _fw.convert_to_tensor
constant = _fw.constant


def _op(name):
    return getattr(_raw, name)


def _int_vector(v, dtype=_dtypes.int32):
    """A shape-like argument: a Tensor as is, a list of ints (or of scalar
    tensors) as one int vector."""
    if isinstance(v, _fw.Tensor):
        return v
    v = list(v) if isinstance(v, (list, tuple)) else v
    if isinstance(v, list) and any(isinstance(e, _fw.Tensor) for e in v):
        return _op("Pack")([convert_to_tensor(e, dtype=dtype) for e in v])
    return constant(v, dtype=dtype)


def identity(input, name=None): return _op("Identity")(input, name=name)  # noqa: A002
def stop_gradient(input, name=None): return _op("StopGradient")(input, name=name)  # noqa: A002


def reshape(tensor, shape, name=None):
    return _op("Reshape")(tensor, _int_vector(shape), name=name)


def shape(input, name=None, out_type=_dtypes.int32):  # noqa: A002
    return _op("Shape")(input, out_type=_dtypes.as_dtype(out_type), name=name)


def size(input, name=None, out_type=_dtypes.int32):  # noqa: A002
    return _op("Size")(input, out_type=_dtypes.as_dtype(out_type), name=name)


def rank(input, name=None):  # noqa: A002
    return _op("Rank")(input, name=name)


def transpose(a, perm=None, name="transpose", conjugate=False):
    a = convert_to_tensor(a)
    if perm is None:
        r = a.shape.ndims
        if r is None:
            perm = _op("Sub")(_op("Sub")(_op("Rank")(a), 1), _op("Range")(0, _op("Rank")(a), 1))
        else:
            perm = list(_builtins.range(r - 1, -1, -1))
    return _op("Transpose")(a, _int_vector(perm), name=name)


def concat(values, axis, name="concat"):
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if len(values) == 1:
        return identity(values[0], name=name)
    return _op("Concat")(values, convert_to_tensor(axis, dtype=_dtypes.int32), name=name)


def stack(values, axis=0, name="stack"):
    return _op("Pack")(list(values), axis=int(axis), name=name)


def unstack(value, num=None, axis=0, name="unstack"):
    value = convert_to_tensor(value)
    if num is None:
        dims = value.shape
        if dims.ndims is None or dims[axis] is None:
            raise ValueError(f"Cannot infer num from shape {dims} of '{value.name}'; pass num=")
        num = dims[axis]
    out = _op("Unpack")(value, num=int(num), axis=int(axis), name=name)
    return list(out) if isinstance(out, tuple) else ([out] if num == 1 else [])


pack, unpack = stack, unstack


def slice(input_, begin, size, name=None):  # noqa: A001
    return _op("Slice")(input_, _int_vector(begin), _int_vector(size), name=name)


def tile(input, multiples, name=None):  # noqa: A002
    return _op("Tile")(input, _int_vector(multiples), name=name)


def fill(dims, value, name=None):
    return _op("Fill")(_int_vector(dims), value, name=name or "Fill")


def _filled(value, shape, dtype, name):
    # As TensorFlow does: a small tensor is a constant, a large one a Fill
    # computed where it is placed (a constant would be built here, whole).
    dtype = _dtypes.as_dtype(dtype)
    if isinstance(shape, _fw.Tensor):
        return fill(shape, constant(value, dtype=dtype), name=name)
    shape = list(shape)
    if any(isinstance(d, _fw.Tensor) for d in shape):
        return fill(shape, constant(value, dtype=dtype), name=name)
    if len(shape) > 0 and _np.prod(shape, dtype=_np.int64) > 1000:
        return fill(shape, constant(value, dtype=dtype), name=name)
    return constant(value, dtype=dtype, shape=shape, name=name)


def zeros(shape, dtype=_dtypes.float32, name=None):
    return _filled(0, shape, dtype, name or "zeros")


def ones(shape, dtype=_dtypes.float32, name=None):
    return _filled(1, shape, dtype, name or "ones")


def _like(op_name, value):
    def fn(tensor, dtype=None, name=None, optimize=True):
        t = convert_to_tensor(tensor)
        if dtype is not None and _dtypes.as_dtype(dtype) != t.dtype:
            return fill(shape(t), constant(value, dtype=dtype), name=name)
        return _op(op_name)(t, name=name)
    return fn


zeros_like = _like("ZerosLike", 0)
ones_like = _like("OnesLike", 1)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    if limit is None:
        start, limit = 0, start
    vals = [start, limit, delta]
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype)
    else:
        tensors = [v for v in vals if isinstance(v, _fw.Tensor)]
        if tensors:
            dt = tensors[0].dtype
        elif any(isinstance(v, float) for v in vals):
            dt = _dtypes.float32
        else:
            dt = _dtypes.int32
    return _op("Range")(*[_op("Cast")(v, DstT=dt) if isinstance(v, _fw.Tensor) and v.dtype != dt
                          else convert_to_tensor(v, dtype=dt) for v in vals], name=name)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    indices = convert_to_tensor(indices)
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype)
    elif isinstance(on_value, _fw.Tensor):
        dt = on_value.dtype
    elif isinstance(off_value, _fw.Tensor):
        dt = off_value.dtype
    else:
        dt = _dtypes.float32
    on = convert_to_tensor(1 if on_value is None else on_value, dtype=dt)
    off = convert_to_tensor(0 if off_value is None else off_value, dtype=dt)
    return _op("OneHot")(indices, convert_to_tensor(depth, dtype=_dtypes.int32), on, off,
                         axis=-1 if axis is None else int(axis), name=name)


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    axis = axis if axis is not None else dim
    if axis is None:
        raise ValueError("expand_dims needs axis")
    return _op("ExpandDims")(input, convert_to_tensor(axis, dtype=_dtypes.int32), name=name)


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    axis = axis if axis is not None else squeeze_dims
    if axis is None:
        axis = []
    elif isinstance(axis, int):
        axis = [axis]
    return _op("Squeeze")(input, squeeze_dims=[int(a) for a in axis], name=name)


def where(condition, x=None, y=None, name=None):
    """One argument: the coordinates of the true elements ([n, rank] int64).
    Three: elementwise (or row-wise, for a vector condition) choice."""
    if x is None and y is None:
        return _op("Where")(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be given, or neither")
    if isinstance(x, _fw.Tensor) and not isinstance(y, _fw.Tensor):
        y = convert_to_tensor(y, dtype=x.dtype)
    elif isinstance(y, _fw.Tensor) and not isinstance(x, _fw.Tensor):
        x = convert_to_tensor(x, dtype=y.dtype)
    return _op("Select")(condition, x, y, name=name)


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """A list of `num_or_size_splits` equal parts along `axis`, or of parts
    of the given sizes (one may be -1)."""
    value = convert_to_tensor(value)
    axis_t = convert_to_tensor(axis, dtype=_dtypes.int32)
    if isinstance(num_or_size_splits, int):
        out = _op("Split")(axis_t, value, num_split=int(num_or_size_splits), name=name)
        return list(out) if isinstance(out, tuple) else [out]
    sizes = _int_vector(num_or_size_splits)
    if num is None:
        dims = sizes.shape
        if dims.ndims != 1 or dims[0] is None:
            raise ValueError(f"Cannot infer num from shape {dims} of size_splits; pass num=")
        num = dims[0]
    out = _op("SplitV")(value, sizes, axis_t, num_split=int(num), name=name)
    return list(out) if isinstance(out, tuple) else [out]


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    mode = mode.upper()
    if mode != "CONSTANT":
        raise NotImplementedError(f"tf.pad mode={mode!r} (only CONSTANT so far)")
    tensor = convert_to_tensor(tensor)
    paddings = paddings if isinstance(paddings, _fw.Tensor) else constant(_np.asarray(paddings), dtype=_dtypes.int32)
    if isinstance(constant_values, (int, float)) and constant_values == 0:
        return _op("Pad")(tensor, paddings, name=name)
    return _op("PadV2")(tensor, paddings, convert_to_tensor(constant_values, dtype=tensor.dtype), name=name)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                  shrink_axis_mask=0, var=None, name=None):
    begin = _int_vector(begin)
    end = _int_vector(end)
    strides = _int_vector(strides) if strides is not None else _op("OnesLike")(begin)
    return _op("StridedSlice")(input_, begin, end, strides, begin_mask=begin_mask, end_mask=end_mask,
                               ellipsis_mask=ellipsis_mask, new_axis_mask=new_axis_mask,
                               shrink_axis_mask=shrink_axis_mask, name=name)


def getitem(tensor, key):
    """tensor[key] for ints, slices, Ellipsis, None (tf.newaxis) and scalar
    tensors, as StridedSlice's masks (TensorFlow's _slice_helper)."""
    if not isinstance(key, tuple):
        key = (key,)
    begin, end, strides = [], [], []
    masks = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
    for i, k in enumerate(key):
        bit = 1 << i
        if isinstance(k, _builtins.slice):
            for part, mask in ((k.start, "begin_mask"), (k.stop, "end_mask")):
                if part is None:
                    masks[mask] |= bit
            begin.append(0 if k.start is None else k.start)
            end.append(0 if k.stop is None else k.stop)
            if isinstance(k.step, int) and k.step == 0:
                raise ValueError("slice step cannot be zero")
            strides.append(1 if k.step is None else k.step)
        elif k is Ellipsis:
            masks["ellipsis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif k is None:
            masks["new_axis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif isinstance(k, (int, _np.integer)) or (isinstance(k, _fw.Tensor) and k.shape.ndims == 0):
            masks["shrink_axis_mask"] |= bit
            begin.append(k)
            end.append(k + 1 if not isinstance(k, _fw.Tensor) else _op("Add")(k, 1))
            strides.append(1)
        else:
            raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
                            f"int32/int64 tensors are valid indices, got {k!r}")
    # One index dtype for begin, end and strides: int64 if a tensor index is.
    wide = any(isinstance(v, _fw.Tensor) and v.dtype == _dtypes.int64 for v in begin)
    dt = _dtypes.int64 if wide else _dtypes.int32
    return _op("StridedSlice")(tensor, _int_vector(begin, dt), _int_vector(end, dt), _int_vector(strides, dt),
                               **masks)


def reverse(tensor, axis, name=None):
    """The elements of `tensor` in reverse order along each axis of `axis`
    (a list of ints), as one StridedSlice with stride -1 there."""
    tensor = convert_to_tensor(tensor)
    axis = [axis] if isinstance(axis, int) else list(axis)
    rank = tensor.shape.ndims
    if rank is None:
        raise NotImplementedError(f"reverse of '{tensor.name}', whose rank is unknown")
    flip = {a % rank for a in axis}
    key = tuple(_builtins.slice(None, None, -1 if d in flip else None) for d in _builtins.range(rank))
    return identity(getitem(tensor, key), name=name) if name else getitem(tensor, key)


reverse_v2 = reverse


def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dtypes.float32, name=None):
    if batch_shape is not None:
        raise NotImplementedError("eye with batch_shape")
    num_columns = num_rows if num_columns is None else num_columns
    return one_hot(range(num_rows), num_columns, dtype=dtype, name=name)


def linspace(start, stop, num, name=None):
    start = convert_to_tensor(start)
    stop = convert_to_tensor(stop, dtype=start.dtype)
    n = convert_to_tensor(num, dtype=_dtypes.int32)
    steps = _op("Cast")(range(n), DstT=start.dtype)
    denom = _op("Cast")(_op("Maximum")(_op("Sub")(n, 1), 1), DstT=start.dtype)
    return _op("Add")(start, steps * ((stop - start) / denom), name=name)


lin_space = linspace


def sequence_mask(lengths, maxlen=None, dtype=_dtypes.bool, name=None):
    """mask[i, j] = j < lengths[i] (any rank of lengths)."""
    lengths = convert_to_tensor(lengths)
    if maxlen is None:
        maxlen = _op("Max")(lengths, range(_op("Rank")(lengths)))
    maxlen = _op("Cast")(maxlen, DstT=lengths.dtype) if isinstance(maxlen, _fw.Tensor) else maxlen
    row = range(convert_to_tensor(maxlen, dtype=lengths.dtype))
    mask = _op("Less")(row, expand_dims(lengths, -1))
    if _dtypes.as_dtype(dtype) != _dtypes.bool:
        mask = _op("Cast")(mask, DstT=dtype)
    return identity(mask, name=name) if name else mask


newaxis = None
