"""tf.metrics (TensorFlow 1.x): streaming metrics kept in local variables
(LOCAL_VARIABLES and METRIC_VARIABLES; initialise them with
tf.local_variables_initializer()). Each returns (value, update_op): the
update op adds a batch and yields the new value."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _ro

GraphKeys = _fw.GraphKeys


def _metric_variable(name, dtype):
    with _fw.control_dependencies(None):
        return _fw.Variable(_fw.constant(0, dtype=dtype), trainable=False, name=name,
                            collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES])


def _sum(x):
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"tf.metrics: the rank of '{x.name}' must be known")
    return _ro.Sum(x, _fw.constant(list(range(rank)), dtype=_dtypes.int32), keep_dims=False)


def _safe_div(num, den, name):
    """num / den, 0 where den is 0 (as TF's div_no_nan for these counts)."""
    zero = _fw.constant(0, dtype=den.dtype)
    return _ro.Select(_ro.Greater(den, zero), _ro.Div(num, _ro.Maximum(den, _fw.constant(1e-30, dtype=den.dtype))),
                      _ro.ZerosLike(num), name=name)


def _add_collections(value, update, metrics_collections, updates_collections):
    for c in metrics_collections or []:
        _fw.add_to_collection(c, value)
    for c in updates_collections or []:
        _fw.add_to_collection(c, update)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen so far."""
    with _fw.variable_scope(name, default_name="mean"):
        values = _fw.convert_to_tensor(values)
        dt = _dtypes.float64 if values.dtype == _dtypes.float64 else _dtypes.float32
        values = _ro.Cast(values, DstT=dt._distflow_dtype)
        total = _metric_variable("total", dt)
        count = _metric_variable("count", dt)
        if weights is None:
            batch_sum = _sum(values)
            batch_count = _ro.Cast(_ro.Size(values), DstT=dt._distflow_dtype)
        else:
            w = _ro.Mul(_ro.Cast(_fw.convert_to_tensor(weights), DstT=dt._distflow_dtype), _ro.OnesLike(values))
            batch_sum = _sum(_ro.Mul(values, w))
            batch_count = _sum(w)
        update_total = total.assign_add(batch_sum)
        update_count = count.assign_add(batch_count)
        value = _safe_div(total, count, "value")
        update = _safe_div(update_total, update_count, "update_op")
        _add_collections(value, update, metrics_collections, updates_collections)
        return value, update


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The fraction of predictions equal to labels, over every batch so far."""
    with _fw.name_scope(name, default_name="accuracy"):
        labels = _fw.convert_to_tensor(labels)
        predictions = _fw.convert_to_tensor(predictions)
        if predictions.dtype != labels.dtype:
            predictions = _ro.Cast(predictions, DstT=labels.dtype._distflow_dtype)
        correct = _ro.Cast(_ro.Equal(predictions, labels), DstT=_dtypes.float32._distflow_dtype)
    return mean(correct, weights, metrics_collections, updates_collections, name or "accuracy")


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                        name=None):
    predictions = _fw.convert_to_tensor(predictions)
    labels = _ro.Cast(_fw.convert_to_tensor(labels), DstT=predictions.dtype._distflow_dtype)
    return mean(_ro.Abs(_ro.Sub(predictions, labels)), weights, metrics_collections, updates_collections,
                name or "mean_absolute_error")


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    predictions = _fw.convert_to_tensor(predictions)
    labels = _ro.Cast(_fw.convert_to_tensor(labels), DstT=predictions.dtype._distflow_dtype)
    return mean(_ro.Square(_ro.Sub(predictions, labels)), weights, metrics_collections, updates_collections,
                name or "mean_squared_error")


def _true_false(labels, predictions, weights, want_label, want_pred):
    f32 = _dtypes.float32._distflow_dtype
    lab = _ro.Cast(_ro.Cast(_fw.convert_to_tensor(labels), DstT=_dtypes.bool._distflow_dtype), DstT=f32)
    pred = _ro.Cast(_ro.Cast(_fw.convert_to_tensor(predictions), DstT=_dtypes.bool._distflow_dtype), DstT=f32)
    one = _fw.constant(1.0)
    a = lab if want_label else _ro.Sub(one, lab)
    b = pred if want_pred else _ro.Sub(one, pred)
    hit = _ro.Mul(a, b)
    if weights is not None:
        hit = _ro.Mul(hit, _ro.Cast(_fw.convert_to_tensor(weights), DstT=f32))
    return _sum(hit)


def _ratio_metric(labels, predictions, weights, metrics_collections, updates_collections, name, default, other):
    with _fw.variable_scope(name, default_name=default):
        tp_var = _metric_variable("true_positives", _dtypes.float32)
        other_var = _metric_variable(other[0], _dtypes.float32)
        upd_tp = tp_var.assign_add(_true_false(labels, predictions, weights, True, True))
        upd_other = other_var.assign_add(_true_false(labels, predictions, weights, *other[1]))
        value = _safe_div(tp_var, _ro.Add(tp_var, other_var), "value")
        update = _safe_div(upd_tp, _ro.Add(upd_tp, upd_other), "update_op")
        _add_collections(value, update, metrics_collections, updates_collections)
        return value, update


def precision(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """true positives / (true positives + false positives), over every batch so far."""
    return _ratio_metric(labels, predictions, weights, metrics_collections, updates_collections, name,
                         "precision", ("false_positives", (False, True)))


def recall(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """true positives / (true positives + false negatives), over every batch so far."""
    return _ratio_metric(labels, predictions, weights, metrics_collections, updates_collections, name,
                         "recall", ("false_negatives", (True, False)))
