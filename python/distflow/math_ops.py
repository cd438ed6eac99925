"""TensorFlow 1.x's math functions (tf.add, tf.reduce_sum, tf.maximum,
tf.clip_by_norm, ...), each a thin layer over one registered op or a few.
Names, argument order and keywords (axis/reduction_indices, keepdims/
keep_dims, name) are TF1's."""
import builtins as _builtins

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw

convert_to_tensor = _fw.convert_to_tensor


def _op(name):
    return getattr(_raw, name)


def _pair(x, y):
    """x and y as tensors of one dtype: a Python value takes the other's."""
    if isinstance(x, _fw.Tensor) and not isinstance(y, _fw.Tensor):
        return x, convert_to_tensor(y, dtype=x.dtype)
    if isinstance(y, _fw.Tensor) and not isinstance(x, _fw.Tensor):
        return convert_to_tensor(x, dtype=y.dtype), y
    return convert_to_tensor(x), convert_to_tensor(y)


def _binary(op_name):
    def fn(x, y, name=None):
        x, y = _pair(x, y)
        return _op(op_name)(x, y, name=name)
    return fn


add = _binary("Add")
subtract = _binary("Sub")
multiply = _binary("Mul")
divide = _binary("Div")
truediv = divide
realdiv = divide
pow = _binary("Pow")  # noqa: A001 (TensorFlow's name)
maximum = _binary("Maximum")
minimum = _binary("Minimum")
equal = _binary("Equal")
not_equal = _binary("NotEqual")
less = _binary("Less")
less_equal = _binary("LessEqual")
greater = _binary("Greater")
greater_equal = _binary("GreaterEqual")
logical_and = _binary("LogicalAnd")
logical_or = _binary("LogicalOr")
mul, sub, div = multiply, subtract, divide


def logical_not(x, name=None): return _op("LogicalNot")(x, name=name)
def logical_xor(x, y, name="LogicalXor"): return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=name)


def _unary(op_name):
    def fn(x, name=None):
        return _op(op_name)(x, name=name)
    fn.__name__ = op_name.lower()
    return fn


abs = _unary("Abs")  # noqa: A001
sign = _unary("Sign")
negative = _unary("Neg")
neg = negative
square = _unary("Square")
sqrt = _unary("Sqrt")
rsqrt = _unary("Rsqrt")
exp = _unary("Exp")
log = _unary("Log")
log1p = _unary("Log1p")
expm1 = _unary("Expm1")
reciprocal = _unary("Reciprocal")
sin = _unary("Sin")
cos = _unary("Cos")
floor = _unary("Floor")
ceil = _unary("Ceil")
round = _unary("Round")  # noqa: A001
is_nan = _unary("IsNan")
is_inf = _unary("IsInf")
is_finite = _unary("IsFinite")
sigmoid = _unary("Sigmoid")
tanh = _unary("Tanh")
identity = _unary("Identity")


def squared_difference(x, y, name=None):
    return square(subtract(x, y), name=name)


def floordiv(x, y, name=None):
    x, y = _pair(x, y)
    if not x.dtype.is_floating:
        raise NotImplementedError(f"floordiv of {x.dtype.name} tensors (only float32/float64 so far)")
    return floor(divide(x, y), name=name)


def scalar_mul(scalar, x, name=None):
    return multiply(scalar, x, name=name)


def add_n(inputs, name=None):
    inputs = list(inputs)
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    return _op("AddN")(inputs, name=name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    return add_n(inputs, name=name)


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False, a_is_sparse=False,
           b_is_sparse=False, name=None):
    return _op("MatMul")(a, b, transpose_a=_builtins.bool(transpose_a or adjoint_a),
                         transpose_b=_builtins.bool(transpose_b or adjoint_b), name=name)


def cast(x, dtype, name=None):
    x = convert_to_tensor(x)
    dt = _dtypes.as_dtype(dtype)
    return _op("Cast")(x, DstT=dt, name=name)


def _to(dt, default_name):
    def fn(x, name=default_name):
        return cast(x, dt, name=name)
    return fn


to_float = _to(_dtypes.float32, "ToFloat")
to_double = _to(_dtypes.float64, "ToDouble")
to_int32 = _to(_dtypes.int32, "ToInt32")
to_int64 = _to(_dtypes.int64, "ToInt64")
saturate_cast = cast


# ---- reductions ---------------------------------------------------------------


def _axes(axis, reduction_indices, x):
    axis = axis if axis is not None else reduction_indices
    if axis is None:
        rank = x.shape.ndims
        if rank is None:
            return _op("Range")(0, _op("Rank")(x), 1)
        return convert_to_tensor(list(range(rank)), dtype=_dtypes.int32)
    if isinstance(axis, _fw.Tensor):
        return axis
    return convert_to_tensor([axis] if isinstance(axis, int) else list(axis), dtype=_dtypes.int32)


def _keep(keepdims, keep_dims):
    return _builtins.bool(keepdims if keepdims is not None else (keep_dims or False))


def _reduce(op_name, tf_name):
    def reduce_fn(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        x = convert_to_tensor(input_tensor)
        return _op(op_name)(x, _axes(axis, reduction_indices, x), keep_dims=_keep(keepdims, keep_dims), name=name)
    reduce_fn.__name__ = tf_name
    return reduce_fn


reduce_sum = _reduce("Sum", "reduce_sum")
reduce_mean = _reduce("Mean", "reduce_mean")
reduce_max = _reduce("Max", "reduce_max")
reduce_min = _reduce("Min", "reduce_min")
reduce_prod = _reduce("Prod", "reduce_prod")


def _reduce_bool(op_name):
    def fn(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        x = cast(input_tensor, _dtypes.int32)
        r = _op(op_name)(x, _axes(axis, reduction_indices, x), keep_dims=_keep(keepdims, keep_dims))
        return cast(r, _dtypes.bool, name=name)
    return fn


reduce_all = _reduce_bool("Min")
reduce_any = _reduce_bool("Max")


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
    x = convert_to_tensor(input_tensor)
    axes = _axes(axis, reduction_indices, x)
    keep = _keep(keepdims, keep_dims)
    held = _op("StopGradient")(x)
    m = _op("Max")(held, axes, keep_dims=True)
    m_out = m if keep else _op("Max")(held, axes, keep_dims=False)
    return add(log(_op("Sum")(exp(x - m), axes, keep_dims=keep)), m_out, name=name)


def count_nonzero(input_tensor, axis=None, keepdims=None, dtype=_dtypes.int64, name=None, reduction_indices=None,
                  keep_dims=None):
    x = convert_to_tensor(input_tensor)
    nz = cast(not_equal(x, _fw.constant(0, dtype=x.dtype)), _dtypes.int64)
    return cast(reduce_sum(nz, axis, keepdims, None, reduction_indices, keep_dims), dtype, name=name)


def _arg(op_name):
    def fn(input, axis=None, name=None, dimension=None, output_type=_dtypes.int64):  # noqa: A002
        axis = axis if axis is not None else (dimension if dimension is not None else 0)
        return _op(op_name)(input, convert_to_tensor(axis, dtype=_dtypes.int32),
                            output_type=_dtypes.as_dtype(output_type), name=name)
    return fn


argmax = _arg("ArgMax")
argmin = _arg("ArgMin")
arg_max, arg_min = argmax, argmin


# ---- clipping -----------------------------------------------------------------


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    t = convert_to_tensor(t)
    return minimum(maximum(t, clip_value_min), clip_value_max, name=name)


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(l2norm(t), clip_norm), the norm over `axes` (all by default)."""
    t = convert_to_tensor(t)
    l2sum = reduce_sum(square(t), axes, keepdims=True)
    clip_norm = convert_to_tensor(clip_norm, dtype=t.dtype)
    # sqrt only where positive, so a zero tensor has a zero (not NaN) gradient.
    positive = greater(l2sum, _fw.constant(0, dtype=t.dtype))
    safe = _op("Select")(positive, l2sum, _op("OnesLike")(l2sum))
    norm = _op("Select")(positive, sqrt(safe), l2sum)
    return identity(t * clip_norm / maximum(norm, clip_norm), name=name)


def global_norm(t_list, name=None):
    """sqrt(sum of every tensor's squared l2 norm); None entries are skipped."""
    terms = [reduce_sum(square(convert_to_tensor(t))) for t in t_list if t is not None]
    if not terms:
        raise ValueError("global_norm needs at least one tensor that is not None")
    return sqrt(add_n(terms), name=name)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """(list clipped by clip_norm / max(global_norm, clip_norm), global_norm);
    None entries stay None, as in TF1."""
    if isinstance(t_list, _fw.Tensor) or not hasattr(t_list, "__iter__"):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    norm = use_norm if use_norm is not None else global_norm(t_list)
    clip = convert_to_tensor(clip_norm, dtype=norm.dtype)
    scale = clip / maximum(norm, clip)
    out = [None if t is None else identity(convert_to_tensor(t) * cast(scale, convert_to_tensor(t).dtype))
           for t in t_list]
    return out, norm


def tensordot(a, b, axes, name=None):
    """Sums the products over a's last `axes` dimensions and b's first (an
    int), or over the listed pairs; static shapes only."""
    a, b = _pair(a, b)
    ra, rb = a.shape, b.shape
    if ra.ndims is None or rb.ndims is None:
        raise NotImplementedError("tensordot of tensors whose rank is unknown")
    if isinstance(axes, int):
        axes_a = list(range(ra.ndims - axes, ra.ndims))
        axes_b = list(range(axes))
    else:
        axes_a, axes_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    axes_a = [x % ra.ndims for x in axes_a]
    axes_b = [x % rb.ndims for x in axes_b]
    free_a = [d for d in range(ra.ndims) if d not in axes_a]
    free_b = [d for d in range(rb.ndims) if d not in axes_b]
    dims_a = ra.as_list()
    if any(dims_a[x] is None for x in axes_a):
        raise NotImplementedError("tensordot over dimensions of unknown size")
    k = 1
    for x in axes_a:
        k *= dims_a[x]
    pa = _op("Transpose")(a, convert_to_tensor(free_a + axes_a, dtype=_dtypes.int32))
    pb = _op("Transpose")(b, convert_to_tensor(axes_b + free_b, dtype=_dtypes.int32))
    ints = lambda v: convert_to_tensor(v, dtype=_dtypes.int32)  # noqa: E731
    shape = _op("Concat")([_op("Slice")(_op("Shape")(pa), ints([0]), ints([len(free_a)])),
                           _op("Slice")(_op("Shape")(pb), ints([len(axes_b)]), ints([-1]))], ints(0))
    product = matmul(_op("Reshape")(pa, ints([-1, k])), _op("Reshape")(pb, ints([k, -1])))
    return _op("Reshape")(product, shape, name=name)
