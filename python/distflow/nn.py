"""tf.nn of TensorFlow 1.x: activations, convolution and pooling, the
cross-entropy losses, dropout, normalisation and top-k, with TF1's
signatures. A name this module lacks raises NotImplementedError naming it."""
from distflow import array_ops as _array
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import math_ops as _math
from distflow import random_ops as _random
from distflow import raw_ops as _raw

convert_to_tensor = _fw.convert_to_tensor

# Embedding lookups over one table or its shards (sparse_ops.py).
from distflow.sparse_ops import embedding_lookup, embedding_lookup_sparse  # noqa: E402,F401


def _op(name):
    return getattr(_raw, name)


def relu(features, name=None):
    return _op("Relu")(features, name=name)


relu._is_relu = True  # slim's default activation


def relu6(features, name=None): return _op("Relu6")(features, name=name)
def elu(features, name=None): return _op("Elu")(features, name=name)
def softplus(features, name=None): return _op("Softplus")(features, name=name)
def softsign(features, name=None): return _math.divide(features, 1 + _math.abs(features), name=name)
def sigmoid(x, name=None): return _op("Sigmoid")(x, name=name)
def tanh(x, name=None): return _op("Tanh")(x, name=name)


def log_sigmoid(x, name=None):
    x = convert_to_tensor(x)
    return _math.negative(softplus(-x), name=name)


def selu(features, name=None):
    features = convert_to_tensor(features)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    neg = _math.multiply(alpha, _math.expm1(_math.minimum(features, 0.0)))
    return _math.multiply(scale, _array.where(features > 0, features, neg), name=name)


def swish(features, name=None):
    features = convert_to_tensor(features)
    return _math.multiply(features, sigmoid(features), name=name)


def leaky_relu(features, alpha=0.2, name=None):
    features = convert_to_tensor(features)
    return _math.maximum(features, features * alpha, name=name)


def _last_axis(fn_name, op_name):
    def fn(logits, axis=None, name=None, dim=None):
        axis = axis if axis is not None else dim
        logits = convert_to_tensor(logits)
        rank = logits.shape.ndims
        if axis is not None and axis not in (-1, None) and not (rank is not None and axis == rank - 1):
            perm = list(range(rank))
            perm[axis], perm[-1] = perm[-1], perm[axis]
            return _array.transpose(_op(op_name)(_array.transpose(logits, perm)), perm, name=name)
        return _op(op_name)(logits, name=name)
    fn.__name__ = fn_name
    return fn


softmax = _last_axis("softmax", "Softmax")
log_softmax = _last_axis("log_softmax", "LogSoftmax")


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True, data_format="NHWC",  # noqa: A002
           dilations=None, name=None, filters=None):
    if data_format != "NHWC":
        raise NotImplementedError("conv2d data_format other than NHWC")
    w = filter if filter is not None else filters
    return _op("Conv2D")(input, w, strides=list(strides), padding=padding, name=name)


def _pool(op_name):
    def pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
        if data_format != "NHWC":
            raise NotImplementedError(f"{op_name} data_format other than NHWC")
        return _op(op_name)(value if value is not None else input, ksize=list(ksize), strides=list(strides),
                            padding=padding, name=name)
    return pool


def conv2d_transpose(value, filter=None, output_shape=None, strides=None, padding="SAME",  # noqa: A002
                     data_format="NHWC", name=None, input=None, filters=None):  # noqa: A002
    """The gradient of conv2d with respect to its input, used as a layer:
    `value` [batch, h, w, out_channels] to `output_shape` with `filter`
    [height, width, output_channels, in_channels]."""
    if data_format != "NHWC":
        raise NotImplementedError("conv2d_transpose data_format other than NHWC")
    value = value if value is not None else input
    w = filter if filter is not None else filters
    return _op("Conv2DBackpropInput")(_array._int_vector(output_shape), w, value, strides=list(strides),
                                      padding=padding, name=name)


max_pool = _pool("MaxPool")
avg_pool = _pool("AvgPool")


def bias_add(value, bias, data_format=None, name=None):
    if data_format not in (None, "NHWC", "N...C"):
        raise NotImplementedError(f"bias_add data_format={data_format!r}")
    return _op("BiasAdd")(value, bias, name=name)


def xw_plus_b(x, weights, biases, name=None):
    return bias_add(_math.matmul(x, weights), biases, name=name or "xw_plus_b")


def l2_loss(t, name=None):
    return _op("L2Loss")(t, name=name)


# ---- cross entropy ------------------------------------------------------------


def _xent(logits, labels, dim, name):
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    rank = logits.shape.ndims
    if dim not in (-1, None) and not (rank is not None and dim == rank - 1):
        if rank != 2:
            raise NotImplementedError(f"softmax_cross_entropy_with_logits over dim={dim} of a rank-{rank} tensor")
        logits, labels = _array.transpose(logits), _array.transpose(labels)
    loss, _ = _op("SoftmaxCrossEntropyWithLogits")(logits, labels, name=name)
    return loss


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None):
    """TF1's v1: no gradient into labels. `_sentinel`, the first positional
    argument, may be the logits as TensorFlow 0.12's (logits, labels)
    order passed them."""
    if _sentinel is not None and logits is None:
        logits = _sentinel
        if labels is None:
            raise ValueError("softmax_cross_entropy_with_logits needs labels=")
    if logits is None or labels is None:
        raise ValueError("softmax_cross_entropy_with_logits needs logits= and labels=")
    logits = convert_to_tensor(logits)
    labels = labels if isinstance(labels, _fw.Tensor) else convert_to_tensor(labels, dtype=logits.dtype)
    if labels.dtype != logits.dtype:  # as TF: labels are cast to the logits' dtype
        labels = _raw.Cast(x=labels, DstT=logits.dtype)
    labels = _array.stop_gradient(labels)
    return _xent(logits, labels, axis if axis is not None else dim, name)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None):
    """As v1, but the gradient reaches the labels too."""
    if _sentinel is not None:
        raise ValueError("softmax_cross_entropy_with_logits_v2 takes named arguments only (labels=, logits=)")
    if logits is None or labels is None:
        raise ValueError("softmax_cross_entropy_with_logits_v2 needs logits= and labels=")
    return _xent(logits, labels, axis if axis is not None else dim, name)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    if _sentinel is not None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits takes named arguments only (labels=, logits=)")
    if logits is None or labels is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs logits= and labels=")
    labels = convert_to_tensor(labels)
    if labels.dtype not in (_dtypes.int32, _dtypes.int64):
        raise ValueError(f"labels must be int32 or int64, got {labels.dtype.name}")
    loss, _ = _op("SparseSoftmaxCrossEntropyWithLogits")(logits, labels, name=name)
    return loss


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """max(x, 0) - x * z + log(1 + exp(-|x|)), stable for any logits x."""
    if _sentinel is not None or logits is None or labels is None:
        raise ValueError("sigmoid_cross_entropy_with_logits takes named arguments labels= and logits=")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    return _math.add(relu(logits) - logits * labels, _math.log1p(_math.exp(-_math.abs(logits))), name=name)


def weighted_cross_entropy_with_logits(targets=None, logits=None, pos_weight=None, name=None, labels=None):
    """(1 - z) * x + (1 + (q - 1) * z) * (log(1 + exp(-|x|)) + max(-x, 0))."""
    labels = labels if labels is not None else targets
    logits = convert_to_tensor(logits)
    z = convert_to_tensor(labels, dtype=logits.dtype)
    log_weight = 1 + (convert_to_tensor(pos_weight, dtype=logits.dtype) - 1) * z
    soft = _math.log1p(_math.exp(-_math.abs(logits))) + relu(-logits)
    return _math.add((1 - z) * logits, log_weight * soft, name=name)


# ---- dropout, normalisation, statistics ------------------------------------------


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element with probability keep_prob (or 1 - rate) and scales
    it by 1 / keep_prob; noise_shape shares one draw across broadcast axes."""
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout needs exactly one of keep_prob and rate")
    x = convert_to_tensor(x)
    if keep_prob is None:
        if isinstance(rate, (int, float)) and not 0 <= rate < 1:
            raise ValueError(f"rate must be a scalar in [0, 1), got {rate}")
        keep = 1 - convert_to_tensor(rate, dtype=x.dtype)
    else:
        if isinstance(keep_prob, (int, float)) and not 0 < keep_prob <= 1:
            raise ValueError(f"keep_prob must be a scalar in (0, 1], got {keep_prob}")
        keep = convert_to_tensor(keep_prob, dtype=x.dtype)
    graph_seed, op_seed = _fw.get_seed(seed)
    if noise_shape is None:
        out, _ = _op("Dropout")(x, keep, seed=graph_seed or 0, seed2=op_seed or 0, name=name)
        return out
    u = _random.random_uniform(noise_shape, dtype=x.dtype, seed=seed)
    mask = _math.floor(keep + u)
    return _math.multiply(_math.divide(x, keep), mask, name=name)


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    axis = axis if axis is not None else dim
    x = convert_to_tensor(x)
    sq = _math.reduce_sum(_math.square(x), axis, keepdims=True)
    return _math.multiply(x, _math.rsqrt(_math.maximum(sq, epsilon)), name=name)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) over `axes`; the variance's gradient does not flow
    through the mean (TensorFlow's stop_gradient)."""
    keep = bool(keepdims if keepdims is not None else (keep_dims or False))
    x = convert_to_tensor(x)
    mean = _math.reduce_mean(x, axes, keepdims=True)
    var = _math.reduce_mean(_math.squared_difference(x, _array.stop_gradient(mean)), axes, keepdims=True)
    if not keep:
        mean = _array.squeeze(mean, list(axes))
        var = _array.squeeze(var, list(axes))
    return mean, var


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) * scale / sqrt(variance + epsilon) + offset; offset and
    scale may be None."""
    x = convert_to_tensor(x)
    inv = _math.rsqrt(_math.add(convert_to_tensor(variance, dtype=x.dtype), variance_epsilon))
    if scale is not None:
        inv = inv * convert_to_tensor(scale, dtype=x.dtype)
    shift = -convert_to_tensor(mean, dtype=x.dtype) * inv
    if offset is not None:
        shift = shift + convert_to_tensor(offset, dtype=x.dtype)
    return _math.add(x * inv, shift, name=name)


def zero_fraction(value, name=None):
    value = convert_to_tensor(value)
    zero = _math.equal(value, _fw.constant(0, dtype=value.dtype))
    return _math.reduce_mean(_math.cast(zero, _dtypes.float32), name=name)


def in_top_k(predictions, targets, k, name=None):
    return _op("InTopKV2")(predictions, targets, convert_to_tensor(k, dtype=convert_to_tensor(targets).dtype),
                           name=name)


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002
    return _op("TopKV2")(input, convert_to_tensor(k, dtype=_dtypes.int32), sorted=bool(sorted), name=name)


def local_response_normalization(input, depth_radius=5, bias=1, alpha=1, beta=0.5, name=None):  # noqa: A002
    return _op("LRN")(input, depth_radius=int(depth_radius), bias=float(bias), alpha=float(alpha),
                      beta=float(beta), name=name)


lrn = local_response_normalization


# recurrent networks (distflow/rnn.py): tf.nn.rnn_cell and the RNN functions
from distflow import rnn as _rnn  # noqa: E402
from distflow.rnn import (  # noqa: E402,F401
    bidirectional_dynamic_rnn, dynamic_rnn, static_bidirectional_rnn, static_rnn)
rnn_cell = _rnn.cell_namespace("nn.rnn_cell")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(f"distflow.compat.v1 has no tf.nn.{name} yet")
