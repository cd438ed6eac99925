"""TensorFlow 1.x's partitioned variables: the partitioners
(fixed_size_partitioner, min_max_variable_partitioner,
variable_axis_size_partitioner) and PartitionedVariable, which
get_variable(..., partitioner=p) returns. A PartitionedVariable of shape
[N, ...] split n ways along axis 0 is n ordinary variables "<name>/part_i",
the first N % n of them one row longer, each created by get_variable (so
replica_device_setter puts them round-robin on the ps tasks), each with its
save_slice_info (full name, full shape, offset, own shape).
embedding_lookup(partition_strategy="div") matches this layout. Each part is
saved under its own name; tf.train.Saver.restore joins a checkpoint's parts
(and their optimizer slots) and cuts them again when the number changed."""
import math as _math

import numpy as _np

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw


def _element_bytes(dtype, bytes_per_string_element):
    dt = _dtypes.as_dtype(dtype)
    if dt == _dtypes.string:
        return bytes_per_string_element
    return _np.dtype(dt.as_numpy_dtype).itemsize


def _check_shape(shape, axis):
    shape = [int(d) for d in shape]
    if not 0 <= axis < len(shape):
        raise ValueError(f"partitioner: axis {axis} is out of range for shape {shape}")
    return shape


def fixed_size_partitioner(num_shards, axis=0):
    """num_shards parts along `axis` (fewer if the axis is shorter)."""
    def _partitioner(shape, dtype):
        shape = _check_shape(shape, axis)
        parts = [1] * len(shape)
        parts[axis] = max(1, min(int(num_shards), shape[axis]))
        return parts
    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10, bytes_per_string_element=16):
    """As many parts as keep each at least min_slice_size bytes, at most max_partitions."""
    def _partitioner(shape, dtype):
        shape = _check_shape(shape, axis)
        total = int(_np.prod(shape)) * _element_bytes(dtype, bytes_per_string_element)
        parts = [1] * len(shape)
        parts[axis] = max(1, min(shape[axis], int(max_partitions), int(_math.ceil(total / min_slice_size))))
        return parts
    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16, max_shards=None):
    """Parts of at most max_shard_bytes each (whole slices along `axis`), at most max_shards."""
    if max_shard_bytes < 1:
        raise ValueError(f"variable_axis_size_partitioner: max_shard_bytes must be positive, got {max_shard_bytes}")

    def _partitioner(shape, dtype):
        shape = _check_shape(shape, axis)
        per_slice = int(_np.prod(shape)) / max(shape[axis], 1) * _element_bytes(dtype, bytes_per_string_element)
        slices_per_shard = max(1, int(_math.floor(max_shard_bytes / max(per_slice, 1))))
        n = int(_math.ceil(shape[axis] / slices_per_shard))
        if max_shards:
            n = min(int(max_shards), n)
        parts = [1] * len(shape)
        parts[axis] = max(1, n)
        return parts
    return _partitioner


class SaveSliceInfo:
    """Where a part lies in its full variable (TF's Variable.SaveSliceInfo)."""

    def __init__(self, full_name, full_shape, var_offset, var_shape):
        self.full_name, self.full_shape = full_name, list(full_shape)
        self.var_offset, self.var_shape = list(var_offset), list(var_shape)

    @property
    def spec(self):
        """TF's slice spec: "<full shape> <offset>,<length>:..."."""
        dims = " ".join(str(d) for d in self.full_shape)
        return dims + " " + ":".join(f"{o},{n}" for o, n in zip(self.var_offset, self.var_shape))


def _slices(dim, n):
    """(offset, length) of n parts of dim rows, the first dim % n one longer."""
    base, extra = divmod(dim, n)
    out, offset = [], 0
    for i in range(n):
        length = base + (1 if i < extra else 0)
        out.append((offset, length))
        offset += length
    return out


class PartitionedVariable:
    """A variable stored as parts (tf.PartitionedVariable): iterate it, pass
    it to embedding_lookup, or read it whole (convert_to_tensor
    concatenates the parts)."""

    def __init__(self, name, shape, dtype, variable_list, partitions):
        self._name, self._shape, self._dtype = name, list(shape), _dtypes.as_dtype(dtype)
        self._variable_list, self._partitions = list(variable_list), list(partitions)

    name = property(lambda self: self._name)
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: _fw.TensorShape(self._shape))

    def get_shape(self):
        return self.shape

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        return len(self._variable_list)

    def _get_variable_list(self):
        return list(self._variable_list)

    def _get_partitions(self):
        return list(self._partitions)

    def as_tensor(self):
        if len(self._variable_list) == 1:
            return _raw.Identity(self._variable_list[0])
        axis = next(i for i, p in enumerate(self._partitions) if p > 1)
        return _raw.Concat(self._variable_list, _fw.constant(axis))

    def _as_dense_tensor(self):  # what convert_to_tensor uses
        return self.as_tensor()

    def __repr__(self):
        return f"<tf.PartitionedVariable '{self._name}' shape={self._shape} parts={len(self._variable_list)}>"


def create(get_variable, full_name, name, shape, dtype, initializer, partitioner, **kwargs):
    """get_variable(name, shape, partitioner=p): the parts, each by get_variable."""
    if shape is None:
        raise ValueError(f"get_variable('{full_name}', partitioner=...) needs a shape")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.float32
    shape = [int(d) for d in shape]
    partitions = [int(p) for p in partitioner(shape=shape, dtype=dt)]
    if len(partitions) != len(shape) or any(p < 1 for p in partitions):
        raise ValueError(f"partitioner returned {partitions} for variable '{full_name}' of shape {shape}: "
                         f"one positive count per dimension is needed")
    split = [i for i, p in enumerate(partitions) if p > 1]
    if len(split) > 1:
        raise ValueError(f"variable '{full_name}': can only partition along one axis, got {partitions}")
    axis = split[0] if split else 0
    n = partitions[axis]
    value = None
    if initializer is not None and not callable(initializer):
        value = _np.asarray(initializer) if not isinstance(initializer, _fw.Tensor) else None
        if value is None:
            raise NotImplementedError(f"get_variable('{full_name}', partitioner=...) with a Tensor initializer")
    parts = []
    for i, (offset, length) in enumerate(_slices(shape[axis], n)):
        part_shape = list(shape)
        part_shape[axis] = length
        init = initializer
        if value is not None:
            init = _np.take(value, range(offset, offset + length), axis=axis)
        v = get_variable(f"{name}/part_{i}", shape=part_shape, dtype=dt, initializer=init, partitioner=False, **kwargs)
        offsets = [0] * len(shape)
        offsets[axis] = offset
        v._save_slice_info = SaveSliceInfo(full_name, shape, offsets, part_shape)
        parts.append(v)
    return PartitionedVariable(full_name, shape, dt, parts, partitions)
