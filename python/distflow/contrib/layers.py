"""tf.contrib.layers: regularizers and initializers (the parts TF1 programs
pass to tf.layers and get_variable), and fully_connected/flatten."""
import math

import numpy as _np

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _ro


def _check_scale(scale, what):
    if isinstance(scale, (int, float)):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale}")
        return float(scale)
    raise TypeError(f"{what}: scale must be a number, not {type(scale).__name__}")


def l2_regularizer(scale, scope=None):
    """scale * sum(w^2) / 2 (TF's l2_loss); None for scale 0."""
    scale = _check_scale(scale, "l2_regularizer")
    if scale == 0.0:
        return lambda _: None

    def l2(weights):
        with _fw.name_scope(scope, default_name="l2_regularizer"):
            return _ro.Mul(_fw.constant(scale, dtype=weights.dtype), _ro.L2Loss(weights), name="value")
    return l2


def l1_regularizer(scale, scope=None):
    """scale * sum(|w|); None for scale 0."""
    scale = _check_scale(scale, "l1_regularizer")
    if scale == 0.0:
        return lambda _: None

    def l1(weights):
        with _fw.name_scope(scope, default_name="l1_regularizer"):
            rank = weights.shape.ndims
            axes = _fw.constant(list(range(rank)), dtype=_dtypes.int32)
            return _ro.Mul(_fw.constant(scale, dtype=weights.dtype), _ro.Sum(_ro.Abs(weights), axes, keep_dims=False),
                           name="value")
    return l1


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope)


def sum_regularizer(regularizer_list, scope=None):
    def total(weights):
        parts = [r(weights) for r in regularizer_list]
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else _ro.AddN(parts)
    return total


def apply_regularization(regularizer, weights_list=None):
    """The sum of regularizer over weights_list (default: the WEIGHTS
    collection), added to REGULARIZATION_LOSSES."""
    weights_list = weights_list if weights_list is not None else _fw.get_collection(_fw.GraphKeys.WEIGHTS)
    if not weights_list:
        raise ValueError("No weights to regularize.")
    parts = [p for p in (regularizer(w) for w in weights_list) if p is not None]
    if not parts:
        return _fw.constant(0.0)
    total = parts[0] if len(parts) == 1 else _ro.AddN(parts)
    _fw.add_to_collection(_fw.GraphKeys.REGULARIZATION_LOSSES, total)
    return total


def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=_dtypes.float32):
    """TF1's variance scaling: stddev sqrt(1.3 * factor / n) truncated normal,
    or uniform in +-sqrt(3 * factor / n), n the fan given by mode."""
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")

    def init(shape, dtype=dtype):
        shape = list(shape)
        fan_in = shape[-2] if len(shape) > 1 else (shape[-1] if shape else 1)
        fan_out = shape[-1] if shape else 1
        receptive = float(_np.prod(shape[:-2])) if len(shape) > 2 else 1.0
        fan_in, fan_out = fan_in * receptive, fan_out * receptive
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return _fw.random_uniform_initializer(-limit, limit, seed)(shape, _dtypes.as_dtype(dtype))
        return _fw.truncated_normal_initializer(0.0, math.sqrt(1.3 * factor / n), seed)(shape,
                                                                                         _dtypes.as_dtype(dtype))
    return init


def xavier_initializer(uniform=True, seed=None, dtype=_dtypes.float32):
    return variance_scaling_initializer(1.0, "FAN_AVG", uniform, seed, dtype)


xavier_initializer_conv2d = xavier_initializer


def flatten(inputs, outputs_collections=None, scope=None):
    from distflow import layers
    return layers.flatten(inputs, name=scope or "Flatten")


def _relu(x):
    return _ro.Relu(x)


def fully_connected(inputs, num_outputs, activation_fn=_relu, normalizer_fn=None, normalizer_params=None,
                    weights_initializer=None, weights_regularizer=None, biases_initializer=None,
                    biases_regularizer=None, reuse=None, variables_collections=None, outputs_collections=None,
                    trainable=True, scope=None, **kwargs):
    """inputs @ weights + biases, then activation_fn (relu by default, as TF1's
    contrib); variables <scope>/weights and <scope>/biases."""
    if normalizer_fn is not None:
        raise NotImplementedError("tf.contrib.layers.fully_connected(normalizer_fn=...)")
    x = _fw.convert_to_tensor(inputs)
    with _fw.variable_scope(scope, default_name="fully_connected", reuse=reuse):
        w = _fw.get_variable("weights", [x.shape[-1], num_outputs], dtype=x.dtype,
                             initializer=weights_initializer or xavier_initializer(),
                             regularizer=weights_regularizer, trainable=trainable)
        _fw.add_to_collection(_fw.GraphKeys.WEIGHTS, w)
        y = _ro.MatMul(x, w)
        if biases_initializer is not False:
            b = _fw.get_variable("biases", [num_outputs], dtype=x.dtype,
                                 initializer=biases_initializer or _fw.zeros_initializer(),
                                 regularizer=biases_regularizer, trainable=trainable)
            _fw.add_to_collection(_fw.GraphKeys.BIASES, b)
            y = _ro.BiasAdd(y, b)
        return activation_fn(y) if activation_fn is not None else y
