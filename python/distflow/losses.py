"""tf.losses (TensorFlow 1.x): weighted losses reduced as TF1 reduces them
(by default the sum over the elements with a non-zero weight, divided by
their count), each added to the LOSSES collection, and get_total_loss
adding the REGULARIZATION_LOSSES."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _ro

GraphKeys = _fw.GraphKeys


class Reduction:
    """How compute_weighted_loss reduces (tf.losses.Reduction)."""
    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
                cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _all_axes(x):
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"tf.losses: the rank of '{x.name}' must be known")
    return _fw.constant(list(range(rank)), dtype=_dtypes.int32)


def _sum(x):
    return _ro.Sum(x, _all_axes(x), keep_dims=False)


def _safe_div(num, den):
    """num / den, 0 where den is 0 (num is then 0 too)."""
    return _ro.Div(num, _ro.Maximum(den, _fw.constant(1e-30, dtype=den.dtype)))


def _num_elements(x):
    return _ro.Cast(_ro.Size(x), DstT=x.dtype._distflow_dtype)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """losses * weights reduced by `reduction`, added to `loss_collection`."""
    Reduction.validate(reduction)
    with _fw.name_scope(scope, default_name="weighted_loss"):
        losses = _fw.convert_to_tensor(losses)
        dt = losses.dtype
        w = _fw.convert_to_tensor(weights, dtype=dt)
        weighted = _ro.Mul(losses, w)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            total = _sum(weighted)
            if reduction == Reduction.SUM:
                loss = total
            elif reduction == Reduction.MEAN:
                loss = _safe_div(total, _sum(_ro.Mul(_ro.OnesLike(losses), w)))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _safe_div(total, _num_elements(losses))
            else:
                nonzero = _ro.Cast(_ro.NotEqual(_ro.Mul(_ro.OnesLike(losses), w), _fw.constant(0, dtype=dt)),
                                   DstT=dt._distflow_dtype)
                loss = _safe_div(total, _sum(nonzero))
        add_loss(loss, loss_collection)
        return loss


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    if loss_collection:
        _fw.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    return _fw.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    return _fw.get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    losses = get_regularization_losses(scope)
    if not losses:
        return _fw.constant(0.0, name=name)
    return _ro.AddN(losses, name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the LOSSES (and the REGULARIZATION_LOSSES)."""
    losses = get_losses(scope)
    if add_regularization_losses:
        losses += get_regularization_losses(scope)
    if not losses:
        raise ValueError("No losses found: add some with tf.losses.* or tf.losses.add_loss")
    return _ro.AddN(losses, name=name) if len(losses) > 1 else _ro.Identity(losses[0], name=name)


def _label_smoothed(labels, smoothing, num_classes_axis_size, dt):
    if not smoothing:
        return labels
    n = _ro.Cast(num_classes_axis_size, DstT=dt._distflow_dtype)
    s = _fw.constant(smoothing, dtype=dt)
    return _ro.Add(_ro.Mul(labels, _fw.constant(1.0 - smoothing, dtype=dt)), _ro.Div(s, n))


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="softmax_cross_entropy_loss"):
        logits = _fw.convert_to_tensor(logits)
        labels = _ro.Cast(_fw.convert_to_tensor(onehot_labels), DstT=logits.dtype._distflow_dtype)
        if label_smoothing:
            shape = _ro.Shape(labels)
            last = _ro.Slice(shape, _fw.constant([1], dtype=_dtypes.int32), _fw.constant([1], dtype=_dtypes.int32))
            labels = _label_smoothed(labels, label_smoothing, _ro.Reshape(last, _fw.constant([], dtype=_dtypes.int32)),
                                     logits.dtype)
        losses, _ = _ro.SoftmaxCrossEntropyWithLogits(logits, _ro.StopGradient(labels))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="sparse_softmax_cross_entropy_loss"):
        logits = _fw.convert_to_tensor(logits)
        labels = _fw.convert_to_tensor(labels)
        if labels.dtype not in (_dtypes.int32, _dtypes.int64):
            raise TypeError(f"sparse_softmax_cross_entropy: labels must be int32 or int64, not {labels.dtype.name} "
                            f"('{labels.name}')")
        losses, _ = _ro.SparseSoftmaxCrossEntropyWithLogits(logits, labels)
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="sigmoid_cross_entropy_loss"):
        logits = _fw.convert_to_tensor(logits)
        dt = logits.dtype
        z = _ro.Cast(_fw.convert_to_tensor(multi_class_labels), DstT=dt._distflow_dtype)
        if label_smoothing:
            z = _ro.Add(_ro.Mul(z, _fw.constant(1.0 - label_smoothing, dtype=dt)),
                        _fw.constant(0.5 * label_smoothing, dtype=dt))
        losses = sigmoid_xent(z, logits)
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def sigmoid_xent(labels, logits):
    """max(x, 0) - x * z + log(1 + exp(-|x|)): stable for any logit."""
    dt = logits.dtype
    zero, one = _fw.constant(0.0, dtype=dt), _fw.constant(1.0, dtype=dt)
    return _ro.Add(_ro.Sub(_ro.Maximum(logits, zero), _ro.Mul(logits, labels)),
                   _ro.Log(_ro.Add(one, _ro.Exp(_ro.Neg(_ro.Abs(logits))))))


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="mean_squared_error"):
        predictions = _fw.convert_to_tensor(predictions)
        labels = _ro.Cast(_fw.convert_to_tensor(labels), DstT=predictions.dtype._distflow_dtype)
        losses = _ro.Square(_ro.Sub(predictions, labels))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="absolute_difference"):
        predictions = _fw.convert_to_tensor(predictions)
        labels = _ro.Cast(_fw.convert_to_tensor(labels), DstT=predictions.dtype._distflow_dtype)
        losses = _ro.Abs(_ro.Sub(predictions, labels))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="huber_loss"):
        predictions = _fw.convert_to_tensor(predictions)
        dt = predictions.dtype
        labels = _ro.Cast(_fw.convert_to_tensor(labels), DstT=dt._distflow_dtype)
        err = _ro.Abs(_ro.Sub(predictions, labels))
        d = _fw.constant(delta, dtype=dt)
        quad = _ro.Minimum(err, d)
        lin = _ro.Sub(err, quad)
        losses = _ro.Add(_ro.Mul(_fw.constant(0.5, dtype=dt), _ro.Square(quad)), _ro.Mul(d, lin))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None, loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="log_loss"):
        p = _fw.convert_to_tensor(predictions)
        dt = p.dtype
        y = _ro.Cast(_fw.convert_to_tensor(labels), DstT=dt._distflow_dtype)
        one, eps = _fw.constant(1.0, dtype=dt), _fw.constant(epsilon, dtype=dt)
        losses = _ro.Neg(_ro.Add(_ro.Mul(y, _ro.Log(_ro.Add(p, eps))),
                                 _ro.Mul(_ro.Sub(one, y), _ro.Log(_ro.Add(_ro.Sub(one, p), eps)))))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    with _fw.name_scope(scope, default_name="hinge_loss"):
        logits = _fw.convert_to_tensor(logits)
        dt = logits.dtype
        y = _ro.Cast(_fw.convert_to_tensor(labels), DstT=dt._distflow_dtype)
        one, two = _fw.constant(1.0, dtype=dt), _fw.constant(2.0, dtype=dt)
        signs = _ro.Sub(_ro.Mul(two, y), one)
        losses = _ro.Relu(_ro.Sub(one, _ro.Mul(logits, signs)))
        return compute_weighted_loss(losses, weights, None, loss_collection, reduction)
