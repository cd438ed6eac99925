"""TensorFlow 1.x's random tensors (tf.random_normal, tf.random_uniform,
tf.truncated_normal) and tf.set_random_seed with TF1's seed rules: with a
graph seed set, an op without its own seed takes the graph's count of ops
so far as its op seed, so the same program draws the same values on every
run (framework.get_seed)."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw

get_seed = _fw.get_seed


def set_random_seed(seed):
    """Sets the default graph's seed (None clears it)."""
    _fw.get_default_graph().seed = None if seed is None else int(seed)


def _shape(shape):
    if isinstance(shape, _fw.Tensor):
        return shape
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if any(isinstance(d, _fw.Tensor) for d in shape):
        return _raw.Pack([_fw.convert_to_tensor(d, dtype=_dtypes.int32) for d in shape])
    return _fw.constant(shape, dtype=_dtypes.int32)


def _draw(op_name, shape, dtype, seed):
    dt = _dtypes.as_dtype(dtype)
    if not dt.is_floating:
        raise NotImplementedError(f"{op_name} of dtype {dt.name} (float32 and float64 only)")
    graph_seed, op_seed = get_seed(seed)
    return getattr(_raw, op_name)(_shape(shape), dtype=dt, seed=graph_seed or 0, seed2=op_seed or 0)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None, name=None):
    dt = _dtypes.as_dtype(dtype)
    r = _draw("RandomStandardNormal", shape, dt, seed)
    return _raw.Add(r * _fw.convert_to_tensor(stddev, dtype=dt), _fw.convert_to_tensor(mean, dtype=dt), name=name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None, name=None):
    dt = _dtypes.as_dtype(dtype)
    r = _draw("TruncatedNormal", shape, dt, seed)
    return _raw.Add(r * _fw.convert_to_tensor(stddev, dtype=dt), _fw.convert_to_tensor(mean, dtype=dt), name=name)


def random_uniform(shape, minval=0, maxval=None, dtype=_dtypes.float32, seed=None, name=None):
    """Floats in [minval, maxval) (maxval 1 by default); integers in
    [minval, maxval), which must then be given."""
    dt = _dtypes.as_dtype(dtype)
    if dt.is_integer:
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {dt.name}")
        u = _draw("RandomUniform", shape, _dtypes.float64, seed)
        lo = _raw.Cast(_fw.convert_to_tensor(minval), DstT=_dtypes.float64)
        hi = _raw.Cast(_fw.convert_to_tensor(maxval), DstT=_dtypes.float64)
        return _raw.Cast(_raw.Floor(u * (hi - lo) + lo), DstT=dt, name=name)
    maxval = 1 if maxval is None else maxval
    u = _draw("RandomUniform", shape, dt, seed)
    lo = _fw.convert_to_tensor(minval, dtype=dt)
    return _raw.Add(u * (_fw.convert_to_tensor(maxval, dtype=dt) - lo), lo, name=name)
