"""tf.train.ExponentialMovingAverage: shadow copies of variables that
follow them with a decay, updated by the op apply() returns."""
import contextlib

import numpy as np

from distflow import framework as _fw
from distflow import raw_ops as _ro


class ExponentialMovingAverage:
    """shadow -= (1 - decay) * (shadow - variable) at each run of apply()'s
    op; with num_updates, decay is min(decay, (1 + n) / (10 + n)). The
    shadows are variables "<variable>/<name>" (not trainable) in the
    MOVING_AVERAGE_VARIABLES collection, initialised to the variables'
    initial values, and saved with the model."""

    def __init__(self, decay, num_updates=None, zero_debias=False, name="ExponentialMovingAverage"):
        if zero_debias:
            raise NotImplementedError("ExponentialMovingAverage(zero_debias=True)")
        self._decay = decay
        self._num_updates = num_updates
        self._name = name
        self._averages = {}  # variable name -> shadow variable

    @property
    def name(self):
        return self._name

    def apply(self, var_list=None):
        if var_list is None:
            var_list = _fw.trainable_variables()
        var_list = list(var_list)
        g = _fw.get_default_graph()
        for v in var_list:
            if v.dtype.name not in ("float32", "float64"):
                raise TypeError(f"ExponentialMovingAverage: the variables must be of a float dtype; '{v.name}' is "
                                f"{v.dtype.name}")
            if v.name in self._averages:
                raise ValueError(f"Moving average already computed for: {v.name}")
            init = getattr(v, "initial_value", None)
            if init is None and not isinstance(v, _fw.Variable) and v.shape.is_fully_defined():
                # A tensor (a loss): its shadow starts at zero, as in TF (which
                # also debiases it; distflow does not yet).
                init = np.zeros(v.shape.as_list(), dtype=v.dtype.as_numpy_dtype)
            if init is None:
                raise ValueError(f"ExponentialMovingAverage: '{v.name}' has no known initial value (apply it to "
                                 f"variables made with tf.Variable or tf.get_variable)")
            saved = (g._name_stack, g._control_stack)
            g._name_stack, g._control_stack = [], []
            try:
                with _fw.device(v.device) if v.device else contextlib.nullcontext():
                    shadow = _fw.Variable(init, trainable=False, name=f"{v.op.name}/{self._name}",
                                          collections=[_fw.GraphKeys.GLOBAL_VARIABLES,
                                                       _fw.GraphKeys.MOVING_AVERAGE_VARIABLES])
            finally:
                g._name_stack, g._control_stack = saved
            self._averages[v.name] = shadow
        with _fw.name_scope(self._name):
            decay = _fw.constant(float(self._decay))
            if self._num_updates is not None:
                n = _ro.Cast(_fw.convert_to_tensor(self._num_updates), DstT=decay.dtype._distflow_dtype)
                decay = _ro.Minimum(decay, _ro.Div(_ro.Add(_fw.constant(1.0), n), _ro.Add(_fw.constant(10.0), n)))
            updates = []
            for v in var_list:
                shadow = self._averages[v.name]
                d = decay if v.dtype == decay.dtype else _ro.Cast(decay, DstT=v.dtype._distflow_dtype)
                one = _fw.constant(1.0, dtype=v.dtype)
                updates.append(shadow.assign_sub(_ro.Mul(_ro.Sub(one, d), _ro.Sub(shadow, v))))
            return _fw.group(*updates, name="update")

    def average(self, var):
        return self._averages.get(var.name)

    def average_name(self, var):
        return f"{var.op.name}/{self._name}"

    def variables_to_restore(self, moving_avg_variables=None):
        """{checkpoint name: variable}: each averaged variable restored from
        its shadow's checkpoint entry, the others from their own."""
        out = {}
        averaged = {v.name for v in (moving_avg_variables or _fw.moving_average_variables())}
        for v in _fw.global_variables():
            if v in _fw.moving_average_variables():
                continue
            key = self.average_name(v) if v.name in self._averages or v.name in averaged else v.op.name
            out[key] = v
        return out

