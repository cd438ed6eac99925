"""Learning-rate schedules of the global step (tf.train.exponential_decay,
piecewise_constant, polynomial_decay, ...): float32 tensors an optimizer
takes as its learning_rate, computed each step with TF1's formulas."""
import math

from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _ro

_F32 = _dtypes.float32


def _f(x):
    """x as a float32 tensor (a Python number, or a tensor cast)."""
    if isinstance(x, _fw.Tensor):
        return x if x.dtype == _F32 else _ro.Cast(x, DstT=_F32._distflow_dtype)
    return _fw.constant(float(x), dtype=_F32)


def _step(global_step, fn):
    if global_step is None:
        raise ValueError(f"global_step is required for {fn}.")
    return _f(global_step)


def _floor_nonnegative(x):
    # Steps are never negative: truncation is the floor.
    return _ro.Cast(_ro.Cast(x, DstT=_dtypes.int64._distflow_dtype), DstT=_F32._distflow_dtype)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * decay_rate ^ (global_step / decay_steps)."""
    with _fw.name_scope(name, default_name="ExponentialDecay"):
        p = _ro.Div(_step(global_step, "exponential_decay"), _f(decay_steps))
        if staircase:
            p = _floor_nonnegative(p)
        return _ro.Mul(_f(learning_rate), _ro.Pow(_f(decay_rate), p))


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    with _fw.name_scope(name, default_name="NaturalExpDecay"):
        p = _ro.Div(_step(global_step, "natural_exp_decay"), _f(decay_steps))
        if staircase:
            p = _floor_nonnegative(p)
        return _ro.Mul(_f(learning_rate), _ro.Exp(_ro.Neg(_ro.Mul(_f(decay_rate), p))))


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    with _fw.name_scope(name, default_name="InverseTimeDecay"):
        p = _ro.Div(_step(global_step, "inverse_time_decay"), _f(decay_steps))
        if staircase:
            p = _floor_nonnegative(p)
        return _ro.Div(_f(learning_rate), _ro.Add(_f(1.0), _ro.Mul(_f(decay_rate), p)))


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                     name=None):
    """(lr - end) * (1 - step / decay_steps) ^ power + end, the step capped at
    decay_steps (or, with cycle, decay_steps grown to the next multiple)."""
    with _fw.name_scope(name, default_name="PolynomialDecay"):
        step = _step(global_step, "polynomial_decay")
        steps = _f(decay_steps)
        if cycle:
            mult = _ro.Maximum(_f(1.0), _ceil_nonnegative(_ro.Div(step, steps)))
            steps = _ro.Mul(steps, mult)
        else:
            step = _ro.Minimum(step, steps)
        frac = _ro.Sub(_f(1.0), _ro.Div(step, steps))
        lr, end = _f(learning_rate), _f(end_learning_rate)
        return _ro.Add(_ro.Mul(_ro.Sub(lr, end), _ro.Pow(frac, _f(power))), end)


def _ceil_nonnegative(x):
    fl = _floor_nonnegative(x)
    return _ro.Add(fl, _ro.Cast(_ro.Greater(x, fl), DstT=_F32._distflow_dtype))


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[1] while x <=
    boundaries[1], ..., values[-1] after the last boundary."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"The length of boundaries ({len(boundaries)}) should be 1 less than the length of values "
                         f"({len(values)})")
    with _fw.name_scope(name, default_name="PiecewiseConstant"):
        x = _fw.convert_to_tensor(x)
        out = _fw.convert_to_tensor(values[-1])
        for b, v in reversed(list(zip(boundaries, values[:-1]))):
            b = _fw.convert_to_tensor(b, dtype=x.dtype) if not isinstance(b, _fw.Tensor) else b
            v = _fw.convert_to_tensor(v, dtype=out.dtype)
            out = _ro.Select(_ro.LessEqual(x, b), v, out)
        return out


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, steps) / steps)) + alpha)."""
    with _fw.name_scope(name, default_name="CosineDecay"):
        step = _ro.Minimum(_step(global_step, "cosine_decay"), _f(decay_steps))
        t = _ro.Mul(_f(math.pi), _ro.Div(step, _f(decay_steps)))
        cosine = _ro.Mul(_f(0.5), _ro.Add(_f(1.0), _cos(t)))
        decayed = _ro.Add(_ro.Mul(_f(1.0 - alpha), cosine), _f(alpha))
        return _ro.Mul(_f(learning_rate), decayed)


def _cos(t):
    """cos(t) for t in [0, pi]: the Cos op if the runtime has one, else its
    Taylor series in t^2 to the t^16 term (error below 2e-7 there)."""
    if hasattr(_ro, "Cos"):
        return _ro.Cos(t)
    u = _ro.Square(t)
    coeffs = [1.0, -1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800, 1 / 479001600, -1 / 87178291200,
              1 / 20922789888000]
    acc = _f(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = _ro.Add(_ro.Mul(acc, u), _f(c))
    return acc
