"""tf.estimator.inputs: input_fns over in-memory arrays, fed through
tf.data (the arrays become constants of the graph; batches are made by the
runtime, not by Python)."""
import collections

import numpy as np

from distflow.data import dataset_ops as _ds


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None, queue_capacity=1000, num_threads=1):
    """An input_fn giving (features, labels) batches of `x` (an array or a
    dict of arrays) and `y`, `num_epochs` times (None: forever), shuffled
    through a buffer of `queue_capacity` elements when shuffle is True."""
    if not isinstance(shuffle, bool):
        raise ValueError(f"numpy_input_fn: shuffle must be given as True or False, got {shuffle!r}")
    single = not isinstance(x, dict)
    features = collections.OrderedDict([("__x", x)]) if single else collections.OrderedDict(x)
    arrays = {k: np.asarray(v) for k, v in features.items()}
    if isinstance(y, dict):
        clash = sorted(set(y) & set(arrays))
        if clash:
            raise ValueError(f"numpy_input_fn: {clash} are keys of both x and y")
    lengths = {k: len(v) for k, v in arrays.items()}
    if y is not None:
        for k, v in (y.items() if isinstance(y, dict) else [("y", y)]):
            lengths[k] = len(v)
    if len(set(lengths.values())) > 1:
        raise ValueError(f"numpy_input_fn: x and y must have the same number of rows, got {lengths}")

    def input_fn():
        labels = None if y is None else ({k: np.asarray(v) for k, v in y.items()} if isinstance(y, dict)
                                         else np.asarray(y))
        ds = _ds.Dataset.from_tensor_slices((dict(arrays), labels) if labels is not None else dict(arrays))
        if shuffle:
            ds = ds.shuffle(queue_capacity)
        ds = ds.repeat(num_epochs).batch(batch_size).prefetch(2)
        element = ds.make_one_shot_iterator().get_next()
        feats, labs = element if labels is not None else (element, None)
        if single:
            feats = feats["__x"]
        return feats, labs

    return input_fn
