"""tf.layers (TensorFlow 1.x's functional layers): dense, conv2d, pooling,
flatten, dropout and batch_normalization, with TF1's variable names
("dense/kernel", "conv2d_1/bias", ...) made through get_variable, so
replica_device_setter places them on the ps and Saver names them as TF1.

A `training` flag may be a Python bool or a boolean tensor; with a tensor
tf.cond picks the branch (as TF1's smart_cond): dropout runs only when
training, and batch normalisation uses the batch's moments or the moving
averages, and updates the averages only when training."""
import numpy as _np

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _ro

GraphKeys = _fw.GraphKeys


def _const_i32(v):
    return _fw.constant(list(v) if isinstance(v, (list, tuple)) else v, dtype=_dtypes.int32)


def _pair(v, what):
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2 or not all(isinstance(e, int) for e in v):
        raise ValueError(f"{what} must be an int or a pair of ints, not {v!r}")
    return v


def _padding(p):
    up = str(p).upper()
    if up not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'valid' or 'same', not {p!r}")
    return up


def _channels_last(data_format, layer):
    if data_format not in ("channels_last", "NHWC", None):
        raise NotImplementedError(f"tf.layers.{layer}(data_format={data_format!r}): only channels_last (NHWC)")


def _static_dims(x, layer):
    dims = x.shape._dims
    if dims is None:
        raise ValueError(f"tf.layers.{layer}: the rank of input '{x.name}' must be known")
    return dims


def _apply_activation(y, activation):
    return activation(y) if activation is not None else y


def _select(training, a, b):
    """a() if the scalar boolean tensor `training` holds, else b() (tf.cond)."""
    from distflow import control_flow_ops
    return control_flow_ops.cond(training, a, b)


def _training_value(training):
    """(python_bool or None, tensor or None) of a training flag."""
    if isinstance(training, _fw.Tensor):
        if training.dtype != _dtypes.bool:
            raise TypeError(f"training must be a bool or a boolean tensor, not {training.dtype.name} "
                            f"('{training.name}')")
        return None, training
    return bool(training), None


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True,
          name=None, reuse=None):
    """inputs @ kernel + bias, then the activation; inputs of rank > 2 are
    multiplied along their last axis, as TF1."""
    x = _fw.convert_to_tensor(inputs)
    dims = _static_dims(x, "dense")
    if dims[-1] is None:
        raise ValueError(f"The last dimension of the inputs to `Dense` should be defined. Found `None` "
                         f"('{x.name}').")
    kw = dict(units=units, activation=None, use_bias=use_bias, kernel_initializer=kernel_initializer,
              bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
              bias_regularizer=bias_regularizer)
    with _fw.variable_scope(name, default_name="dense", reuse=reuse):
        flat = x if len(dims) == 2 else _ro.Reshape(x, _const_i32([-1, dims[-1]]))
        y = _dense_in_scope(flat, trainable, kw)
        if len(dims) > 2:
            if any(d is None for d in dims[1:-1]):
                raise NotImplementedError(f"tf.layers.dense on input '{x.name}' of shape {dims}: only the first "
                                          f"dimension may be unknown")
            y = _ro.Reshape(y, _const_i32([-1] + list(dims[1:-1]) + [units]))
        y = _apply_activation(y, activation)
        if activity_regularizer is not None:
            _fw.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, activity_regularizer(y))
        return y


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid", data_format="channels_last",
           dilation_rate=(1, 1), activation=None, use_bias=True, kernel_initializer=None,
           bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable=True, name=None,
           reuse=None):
    """A 2-D convolution (NHWC) with kernel [kh, kw, in, filters] and bias."""
    _channels_last(data_format, "conv2d")
    if _pair(dilation_rate, "dilation_rate") != [1, 1]:
        raise NotImplementedError("tf.layers.conv2d(dilation_rate != 1)")
    x = _fw.convert_to_tensor(inputs)
    dims = _static_dims(x, "conv2d")
    if len(dims) != 4 or dims[-1] is None:
        raise ValueError(f"tf.layers.conv2d: input '{x.name}' must be [batch, height, width, channels] with known "
                         f"channels, not {dims}")
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(strides, "strides")
    with _fw.variable_scope(name, default_name="conv2d", reuse=reuse):
        kernel = _fw.get_variable("kernel", [kh, kw, dims[-1], filters], dtype=x.dtype,
                                  initializer=kernel_initializer, regularizer=kernel_regularizer,
                                  trainable=trainable)
        y = _ro.Conv2D(x, kernel, strides=[1, sh, sw, 1], padding=_padding(padding))
        if use_bias:
            bias = _fw.get_variable("bias", [filters], dtype=x.dtype,
                                    initializer=bias_initializer or _fw.zeros_initializer(),
                                    regularizer=bias_regularizer, trainable=trainable)
            y = _ro.BiasAdd(y, bias)
        y = _apply_activation(y, activation)
        if activity_regularizer is not None:
            _fw.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, activity_regularizer(y))
        return y


def _pooling(op_name, layer):
    def pool(inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None):
        _channels_last(data_format, layer)
        ph, pw = _pair(pool_size, "pool_size")
        sh, sw = _pair(strides, "strides")
        with _fw.name_scope(name, default_name=layer):
            return getattr(_ro, op_name)(inputs, ksize=[1, ph, pw, 1], strides=[1, sh, sw, 1],
                                         padding=_padding(padding))
    pool.__name__ = layer
    pool.__doc__ = f"tf.layers.{layer}: {op_name} over NHWC input."
    return pool


max_pooling2d = _pooling("MaxPool", "max_pooling2d")
average_pooling2d = _pooling("AvgPool", "average_pooling2d")


def flatten(inputs, name=None, data_format="channels_last"):
    """[batch, ...] -> [batch, prod(...)]; the trailing dimensions must be known."""
    _channels_last(data_format, "flatten")
    x = _fw.convert_to_tensor(inputs)
    dims = _static_dims(x, "flatten")
    rest = dims[1:]
    if any(d is None for d in rest):
        raise NotImplementedError(f"tf.layers.flatten of '{x.name}' of shape {dims}: only the first dimension may "
                                  f"be unknown")
    with _fw.name_scope(name, default_name="flatten"):
        return _ro.Reshape(x, _const_i32([-1, int(_np.prod(rest, dtype=_np.int64))]))


def _dropout_op(x, rate, seed):
    attrs = {}
    if seed is not None:
        attrs["seed"] = int(seed)
    keep = _fw.convert_to_tensor(1.0 - rate, dtype=x.dtype) if not isinstance(rate, _fw.Tensor) else \
        _ro.Sub(_fw.constant(1.0, dtype=x.dtype), rate)
    out, _ = _ro.Dropout(x, keep, **attrs)
    return out


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Drops each input with probability `rate` (scaling the rest by
    1/(1-rate)) when training; the identity otherwise."""
    if noise_shape is not None:
        raise NotImplementedError("tf.layers.dropout(noise_shape=...)")
    x = _fw.convert_to_tensor(inputs)
    flag, tensor = _training_value(training)
    with _fw.name_scope(name, default_name="dropout"):
        if tensor is None:
            return _dropout_op(x, rate, seed) if flag else _ro.Identity(x)
        return _select(tensor, lambda: _dropout_op(x, rate, seed), lambda: _ro.Identity(x))


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                        moving_variance_initializer=None, beta_regularizer=None, gamma_regularizer=None,
                        beta_constraint=None, gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None,
                        virtual_batch_size=None, adjustment=None):
    """Normalises over every axis but `axis` with the batch's moments when
    training and the moving averages otherwise; the moving-average updates
    go to the UPDATE_OPS collection (run them with the train op, as TF1)."""
    if renorm or virtual_batch_size is not None or adjustment is not None:
        raise NotImplementedError("tf.layers.batch_normalization: renorm, virtual_batch_size and adjustment")
    x = _fw.convert_to_tensor(inputs)
    dims = _static_dims(x, "batch_normalization")
    rank = len(dims)
    ax = axis if isinstance(axis, int) else (axis[0] if len(axis) == 1 else None)
    if ax is None:
        raise NotImplementedError("tf.layers.batch_normalization over several axes")
    ax = ax % rank
    if dims[ax] is None:
        raise ValueError(f"tf.layers.batch_normalization: axis {axis} of '{x.name}' has an unknown size")
    n = dims[ax]
    reduce_axes = [i for i in range(rank) if i != ax]
    bshape = [1] * rank
    bshape[ax] = n
    flag, tensor = _training_value(training)
    with _fw.variable_scope(name, default_name="batch_normalization", reuse=reuse):
        dt = x.dtype
        gamma = _fw.get_variable("gamma", [n], dtype=dt, initializer=gamma_initializer or _fw.ones_initializer(),
                                 regularizer=gamma_regularizer, trainable=trainable) if scale else None
        beta = _fw.get_variable("beta", [n], dtype=dt, initializer=beta_initializer or _fw.zeros_initializer(),
                                regularizer=beta_regularizer, trainable=trainable) if center else None
        moving_mean = _fw.get_variable("moving_mean", [n], dtype=dt,
                                       initializer=moving_mean_initializer or _fw.zeros_initializer(),
                                       trainable=False)
        moving_var = _fw.get_variable("moving_variance", [n], dtype=dt,
                                      initializer=moving_variance_initializer or _fw.ones_initializer(),
                                      trainable=False)

        def reshape(v):
            return v if rank == 2 and ax == 1 else _ro.Reshape(v, _const_i32(bshape))

        def normalise(mean, var):
            inv = _ro.Rsqrt(_ro.Add(var, _fw.constant(epsilon, dtype=dt)))
            if gamma is not None:
                inv = _ro.Mul(inv, gamma)
            shift = _ro.Neg(_ro.Mul(mean, inv))
            if beta is not None:
                shift = _ro.Add(shift, beta)
            return _ro.Add(_ro.Mul(x, reshape(inv)), reshape(shift))

        if flag is False:
            return normalise(moving_mean, moving_var)
        axes = _const_i32(reduce_axes)
        mean = _ro.Mean(x, axes, keep_dims=False)
        centred = _ro.Sub(x, reshape(_ro.StopGradient(mean)))
        var = _ro.Mean(_ro.Square(centred), axes, keep_dims=False)
        decay = _fw.constant(1.0 - momentum, dtype=dt)
        if tensor is not None:  # the moving averages when not training, and no update
            used_mean = _select(tensor, lambda: _ro.Identity(mean), lambda: _ro.Identity(moving_mean))
            used_var = _select(tensor, lambda: _ro.Identity(var), lambda: _ro.Identity(moving_var))
            batch = normalise(used_mean, used_var)
            decay = _select(tensor, lambda: _ro.Identity(decay), lambda: _fw.constant(0.0, dtype=dt))
        else:
            batch = normalise(mean, var)
        with _fw.name_scope("AssignMovingAvg"):
            upd_mean = moving_mean.assign_sub(_ro.Mul(_ro.Sub(moving_mean, mean), decay))
        with _fw.name_scope("AssignMovingAvg_1"):
            upd_var = moving_var.assign_sub(_ro.Mul(_ro.Sub(moving_var, var), decay))
        _fw.add_to_collection(GraphKeys.UPDATE_OPS, upd_mean)
        _fw.add_to_collection(GraphKeys.UPDATE_OPS, upd_var)
        return batch


class Layer:
    """The base of tf.layers' classes: call(inputs) builds the layer once."""

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        self.trainable, self.name, self.dtype = trainable, name, dtype

    def __call__(self, inputs, *args, **kwargs):
        return self.call(inputs, *args, **kwargs)

    apply = __call__


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None, trainable=True, name=None, **kwargs):
        super().__init__(trainable, name)
        self._kw = dict(units=units, activation=activation, use_bias=use_bias,
                        kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                        kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer)
        self._built_scope = None

    def call(self, inputs):
        if self._built_scope is None:
            with _fw.variable_scope(self.name, default_name="dense") as vs:
                self._built_scope = vs
                return _dense_in_scope(inputs, self.trainable, self._kw)
        with _fw.variable_scope(self._built_scope, reuse=True):
            return _dense_in_scope(inputs, self.trainable, self._kw)


def _dense_in_scope(inputs, trainable, kw):
    x = _fw.convert_to_tensor(inputs)
    units = kw["units"]
    kernel = _fw.get_variable("kernel", [_static_dims(x, "Dense")[-1], units], dtype=x.dtype,
                              initializer=kw["kernel_initializer"], regularizer=kw["kernel_regularizer"],
                              trainable=trainable)
    y = _ro.MatMul(x, kernel)
    if kw["use_bias"]:
        bias = _fw.get_variable("bias", [units], dtype=x.dtype,
                                initializer=kw["bias_initializer"] or _fw.zeros_initializer(),
                                regularizer=kw["bias_regularizer"], trainable=trainable)
        y = _ro.BiasAdd(y, bias)
    return _apply_activation(y, kw["activation"])
