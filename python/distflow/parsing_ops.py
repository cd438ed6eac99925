"""Parsing of serialized records: tf.decode_raw, tf.parse_example,
tf.parse_single_example with tf.FixedLenFeature / tf.VarLenFeature, and
tf.SparseTensor for what a VarLenFeature gives. Parsing runs in C++
(src/kernels/cpu/parsing_kernels.cc)."""
import collections

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow.data_flow_ops import _encode_shapes


class SparseTensor:
    """tf.SparseTensor: indices [N, rank] int64, values [N], dense_shape [rank] int64."""

    def __init__(self, indices, values, dense_shape):
        self.indices = _fw.convert_to_tensor(indices, dtype=_dtypes.int64)
        self.values = _fw.convert_to_tensor(values)
        self.dense_shape = _fw.convert_to_tensor(dense_shape, dtype=_dtypes.int64)

    dtype = property(lambda self: self.values.dtype)
    graph = property(lambda self: self.values.graph)

    @property
    def shape(self):
        return _fw.TensorShape([None] * (self.dense_shape.shape.as_list()[0] or 0)) \
            if self.dense_shape.shape.as_list() and self.dense_shape.shape.as_list()[0] is not None \
            else _fw.TensorShape(None)

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return f"SparseTensor(indices={self.indices!r}, values={self.values!r}, dense_shape={self.dense_shape!r})"


SparseTensorValue = collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])


class FixedLenFeature(collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature of a fixed number of values, parsed into a dense tensor."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values, parsed into a SparseTensor."""


def decode_raw(bytes, out_type, little_endian=True, name=None):  # noqa: A002 (TensorFlow's name)
    """Each string's bytes as numbers of out_type: shape + [len / size]."""
    dt = _dtypes.as_dtype(out_type)
    return _fw._apply("DecodeRaw", [bytes], {"out_type": dt._distflow_dtype, "little_endian": bool(little_endian)},
                      name=name or "DecodeRaw")


def _check_type(key, dtype):
    dt = _dtypes.as_dtype(dtype)
    if dt not in (_dtypes.string, _dtypes.float32, _dtypes.int64):
        raise ValueError(f"Feature '{key}': features are tf.string, tf.float32 or tf.int64, not {dt.name}")
    return dt


def parse_example(serialized, features, name=None, example_names=None):
    """A batch of serialized tf.train.Example protos: {key: dense tensor
    [batch, ...shape] or SparseTensor} for each feature."""
    if not features:
        raise ValueError("parse_example needs at least one feature")
    sparse = [(k, f) for k, f in sorted(features.items()) if isinstance(f, VarLenFeature)]
    dense = [(k, f) for k, f in sorted(features.items()) if isinstance(f, FixedLenFeature)]
    other = [k for k, f in features.items() if not isinstance(f, (VarLenFeature, FixedLenFeature))]
    if other:
        raise NotImplementedError(f"parse_example supports FixedLenFeature and VarLenFeature; got {other}")
    defaults = []
    for k, f in dense:
        dt = _check_type(k, f.dtype)
        if f.default_value is None:
            defaults.append(_fw.constant([], dtype=dt))
        else:
            import numpy as np
            value = np.asarray(f.default_value, dtype=object if dt == _dtypes.string else dt.as_numpy_dtype)
            defaults.append(_fw.constant(value.reshape(-1).tolist() if dt == _dtypes.string else value.reshape(-1),
                                         dtype=dt))
    attrs = {"Nsparse": len(sparse),
             "sparse_keys": [k for k, _ in sparse],
             "dense_keys": [k for k, _ in dense],
             "sparse_types": [_check_type(k, f.dtype)._distflow_dtype for k, f in sparse],
             "Tdense": [_dtypes.as_dtype(f.dtype)._distflow_dtype for _, f in dense],
             "dense_shapes": _encode_shapes([_fw._shape_list(f.shape) or [] for _, f in dense])}
    outs = _fw._apply("ParseExample", [serialized, defaults], attrs, name=name or "ParseExample")
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    ns = len(sparse)
    result = {}
    for i, (k, _) in enumerate(sparse):
        result[k] = SparseTensor(outs[i], outs[ns + i], outs[2 * ns + i])
    for i, (k, _) in enumerate(dense):
        result[k] = outs[3 * ns + i]
    return result


def parse_single_example(serialized, features, name=None, example_names=None):
    """One serialized tf.train.Example (a scalar string): {key: dense tensor
    of the feature's shape, or a 1-D SparseTensor}."""
    from distflow import array_ops
    batch = array_ops.reshape(serialized, [1])
    parsed = parse_example(batch, features, name=name)
    out = {}
    for k, v in parsed.items():
        if isinstance(v, SparseTensor):
            out[k] = SparseTensor(array_ops.slice(v.indices, [0, 1], [-1, 1]), v.values,
                                  array_ops.slice(v.dense_shape, [1], [1]))
        else:
            out[k] = array_ops.squeeze(v, [0])
    return out
