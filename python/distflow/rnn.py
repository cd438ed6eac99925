"""TF1's recurrent networks over distflow: the cells of tf.nn.rnn_cell /
tf.contrib.rnn (BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell,
MultiRNNCell, DropoutWrapper) and tf.nn.static_rnn, dynamic_rnn and the
bidirectional variants, built from existing ops (MatMul, BiasAdd, Sigmoid,
Tanh, ConcatV2, Split, Select).

Variables are named as TF1 names them ("rnn/basic_lstm_cell/kernel",
"rnn/multi_rnn_cell/cell_0/lstm_cell/bias", ...): a cell makes its
variables with get_variable on its first call (so an enclosing
variable_scope(reuse=True) shares an earlier cell's variables) and reuses
them on every later call.

tf.nn.dynamic_rnn runs a tf.while_loop over the time steps (TensorArrays of
the inputs and outputs, as TF) when the number of time steps is unknown, or
when USE_WHILE_LOOP is set (the environment's DISTFLOW_RNN_WHILE_LOOP=1);
otherwise it unrolls the static time dimension of its inputs, with the same
results. Outputs past a sequence's `sequence_length` are zero and its state
is carried through, as TF (computed for every step, then selected).
DropoutWrapper(variational_recurrent=True) is not supported."""
import collections as _collections

from distflow import array_ops as _array
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import math_ops as _math
from distflow import raw_ops as _raw

import os as _os

# dynamic_rnn with a static number of time steps: a while_loop (True) or unrolled (False).
USE_WHILE_LOOP = _os.environ.get("DISTFLOW_RNN_WHILE_LOOP", "") == "1"


# ---- nested structures (states are tensors, tuples of them, or nested tuples) ----

def _flatten(s):
    if isinstance(s, (tuple, list)):
        return [t for x in s for t in _flatten(x)]
    return [s]


def _pack_as(structure, flat):
    it = iter(flat)

    def build(s):
        if isinstance(s, (tuple, list)):
            items = [build(x) for x in s]
            if isinstance(s, LSTMStateTuple):
                return LSTMStateTuple(*items)
            if hasattr(s, "_fields"):
                return type(s)(*items)
            return type(s)(items)
        return next(it)
    return build(structure)


def _map(fn, *structures):
    flats = [_flatten(s) for s in structures]
    return _pack_as(structures[0], [fn(*xs) for xs in zip(*flats)])


class LSTMStateTuple(_collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """(c, h): an LSTM's cell state and its output."""
    __slots__ = ()

    @property
    def dtype(self):
        if self.c.dtype != self.h.dtype:
            raise TypeError(f"Inconsistent internal state: {self.c.dtype} vs {self.h.dtype}")
        return self.c.dtype


def _static_batch_or_tensor(x):
    dims = x.shape._dims
    if dims and dims[0] is not None:
        return dims[0]
    return _array.shape(x)[0]


def _zeros(batch_size, size, dtype):
    if isinstance(size, (tuple, list)):
        return type(size)(_zeros(batch_size, s, dtype) for s in size) if not hasattr(size, "_fields") \
            else type(size)(*[_zeros(batch_size, s, dtype) for s in size])
    if isinstance(batch_size, _fw.Tensor):
        return _array.zeros(_array.stack([batch_size, int(size)]), dtype=dtype)
    return _array.zeros([int(batch_size), int(size)], dtype=dtype)


def _depth(x, who):
    dims = x.shape._dims
    if dims is None or len(dims) != 2 or dims[1] is None:
        raise ValueError(f"{who}: inputs must be 2-D [batch, depth] with a known depth; got '{x.name}' of shape "
                         f"{x.shape}")
    return dims[1]


def _linear(args, kernel, bias):
    x = args[0] if len(args) == 1 else _array.concat(args, 1)
    y = _math.matmul(x, kernel)
    return _raw.BiasAdd(y, bias) if bias is not None else y


# ---- cells ---------------------------------------------------------------------------

class RNNCell:
    """tf.nn.rnn_cell.RNNCell: a cell maps (inputs, state) to (output,
    new_state). Subclasses define state_size, output_size, build(depth)
    (making their variables with self._var) and call(inputs, state)."""

    _base_name = "rnn_cell"

    def __init__(self, trainable=True, name=None, dtype=None, reuse=None, **kwargs):
        self._name = name
        self._reuse = reuse
        self._dtype = dtype
        self._trainable = trainable
        self.built = False
        self._variables = []
        self._scope_name = None

    @property
    def state_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def variables(self):
        return list(self._variables)

    trainable_variables = trainable_weights = weights = variables

    def build(self, input_depth):
        self.built = True

    def call(self, inputs, state):
        raise NotImplementedError("Abstract method")

    def _var(self, name, shape, initializer=None, dtype=None):
        v = _fw.get_variable(name, shape=shape, dtype=dtype or self._dtype, initializer=initializer,
                             trainable=self._trainable)
        self._variables.append(v)
        return v

    def __call__(self, inputs, state, scope=None):
        inputs = _fw.convert_to_tensor(inputs)
        if not self.built:
            reuse = True if self._reuse else None
            if scope is not None:
                cm = _fw.variable_scope(scope, reuse=reuse)
            elif self._name is not None:
                cm = _fw.variable_scope(self._name, reuse=reuse)
            else:
                cm = _fw.variable_scope(None, default_name=self._base_name)
            with cm as vs:
                self._scope_name = vs.name
                if self._dtype is None:
                    self._dtype = inputs.dtype
                self.build(_depth(inputs, type(self).__name__))
                self.built = True
                return self.call(inputs, state)
        with _fw.name_scope(self._scope_name.rsplit("/", 1)[-1]):
            return self.call(inputs, state)

    def zero_state(self, batch_size, dtype):
        """Zeros of [batch_size, s] for each s of state_size (nested as it)."""
        with _fw.name_scope(type(self).__name__ + "ZeroState"):
            return _zeros(batch_size, self.state_size, _dtypes.as_dtype(dtype))

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            batch_size = _static_batch_or_tensor(_fw.convert_to_tensor(inputs))
            dtype = dtype or inputs.dtype
        return self.zero_state(batch_size, dtype or _dtypes.float32)


def _activation(fn):
    return fn if fn is not None else _math.tanh


class BasicRNNCell(RNNCell):
    """output = new_state = activation(W [inputs, state] + b)."""
    _base_name = "basic_rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._act = _activation(activation)

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, depth):
        self._kernel = self._var("kernel", [depth + self._num_units, self._num_units])
        self._bias = self._var("bias", [self._num_units], initializer=_fw.zeros_initializer())

    def call(self, inputs, state):
        out = self._act(_linear([inputs, state], self._kernel, self._bias))
        return out, out


class BasicLSTMCell(RNNCell):
    """The LSTM of Zaremba et al.: [i, j, f, o] = W [x, h] + b;
    c' = c sigmoid(f + forget_bias) + sigmoid(i) tanh(j); h' = tanh(c') sigmoid(o)."""
    _base_name = "basic_lstm_cell"

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._forget_bias = float(forget_bias)
        self._state_is_tuple = state_is_tuple
        self._act = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    output_size = property(lambda self: self._num_units)

    def build(self, depth):
        n = self._num_units
        self._kernel = self._var("kernel", [depth + n, 4 * n])
        self._bias = self._var("bias", [4 * n], initializer=_fw.zeros_initializer())

    def _split_state(self, state):
        if self._state_is_tuple:
            return state
        c, h = _array.split(state, 2, axis=1)
        return c, h

    def call(self, inputs, state):
        c, h = self._split_state(state)
        i, j, f, o = _array.split(_linear([inputs, h], self._kernel, self._bias), 4, axis=1)
        fb = f + self._forget_bias if self._forget_bias != 0 else f
        new_c = c * _math.sigmoid(fb) + _math.sigmoid(i) * self._act(j)
        new_h = self._act(new_c) * _math.sigmoid(o)
        new_state = LSTMStateTuple(new_c, new_h) if self._state_is_tuple else _array.concat([new_c, new_h], 1)
        return new_h, new_state


class LSTMCell(RNNCell):
    """The LSTM of Hochreiter & Schmidhuber with optional peepholes
    (use_peepholes), cell clipping (cell_clip) and a projection of the
    output (num_proj, proj_clip); state (c, m)."""
    _base_name = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None, num_proj=None,
                 proj_clip=None, num_unit_shards=None, num_proj_shards=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError("LSTMCell: num_unit_shards / num_proj_shards (partitioned variables)")
        self._num_units = int(num_units)
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._forget_bias = float(forget_bias)
        self._state_is_tuple = state_is_tuple
        self._act = _activation(activation)

    @property
    def state_size(self):
        m = self._num_proj or self._num_units
        return LSTMStateTuple(self._num_units, m) if self._state_is_tuple else self._num_units + m

    output_size = property(lambda self: self._num_proj or self._num_units)

    def build(self, depth):
        n, m = self._num_units, self._num_proj or self._num_units
        self._kernel = self._var("kernel", [depth + m, 4 * n], initializer=self._initializer)
        self._bias = self._var("bias", [4 * n], initializer=_fw.zeros_initializer())
        if self._use_peepholes:
            self._w_f = self._var("w_f_diag", [n], initializer=self._initializer)
            self._w_i = self._var("w_i_diag", [n], initializer=self._initializer)
            self._w_o = self._var("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            with _fw.variable_scope("projection"):
                self._proj = self._var("kernel", [n, self._num_proj], initializer=self._initializer)

    def call(self, inputs, state):
        n = self._num_units
        if self._state_is_tuple:
            c, m = state
        else:
            c, m = _array.split(state, [n, self._num_proj or n], axis=1)
        i, j, f, o = _array.split(_linear([inputs, m], self._kernel, self._bias), 4, axis=1)
        if self._use_peepholes:
            c_new = (_math.sigmoid(f + self._forget_bias + self._w_f * c) * c +
                     _math.sigmoid(i + self._w_i * c) * self._act(j))
        else:
            c_new = _math.sigmoid(f + self._forget_bias) * c + _math.sigmoid(i) * self._act(j)
        if self._cell_clip is not None:
            c_new = _math.clip_by_value(c_new, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m_new = _math.sigmoid(o + self._w_o * c_new) * self._act(c_new)
        else:
            m_new = _math.sigmoid(o) * self._act(c_new)
        if self._num_proj is not None:
            m_new = _math.matmul(m_new, self._proj)
            if self._proj_clip is not None:
                m_new = _math.clip_by_value(m_new, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c_new, m_new) if self._state_is_tuple else _array.concat([c_new, m_new], 1)
        return m_new, new_state


class GRUCell(RNNCell):
    """The GRU of Cho et al.: [r, u] = sigmoid(W_g [x, h] + b_g);
    c = tanh(W_c [x, r h] + b_c); h' = u h + (1 - u) c."""
    _base_name = "gru_cell"

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None, bias_initializer=None,
                 name=None, dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, reuse=reuse, **kwargs)
        self._num_units = int(num_units)
        self._act = _activation(activation)
        self._kernel_init = kernel_initializer
        self._bias_init = bias_initializer

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, depth):
        n = self._num_units
        with _fw.variable_scope("gates"):
            self._gate_kernel = self._var("kernel", [depth + n, 2 * n], initializer=self._kernel_init)
            self._gate_bias = self._var("bias", [2 * n], initializer=self._bias_init or _fw.constant_initializer(1.0))
        with _fw.variable_scope("candidate"):
            self._cand_kernel = self._var("kernel", [depth + n, n], initializer=self._kernel_init)
            self._cand_bias = self._var("bias", [n], initializer=self._bias_init or _fw.zeros_initializer())

    def call(self, inputs, state):
        value = _math.sigmoid(_linear([inputs, state], self._gate_kernel, self._gate_bias))
        r, u = _array.split(value, 2, axis=1)
        c = self._act(_linear([inputs, r * state], self._cand_kernel, self._cand_bias))
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """Cells stacked: each one's output is the next one's input; the state
    is the tuple of theirs. Variables under multi_rnn_cell/cell_<i>/."""
    _base_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(int(c.state_size) for c in self._cells)

    output_size = property(lambda self: self._cells[-1].output_size)

    def zero_state(self, batch_size, dtype):
        with _fw.name_scope("MultiRNNCellZeroState"):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return _zeros(batch_size, self.state_size, _dtypes.as_dtype(dtype))

    def __call__(self, inputs, state, scope=None):
        inputs = _fw.convert_to_tensor(inputs)
        if not self.built:
            cm = _fw.variable_scope(scope, reuse=True if self._reuse else None) if scope is not None else \
                _fw.variable_scope(None, default_name=self._base_name)
            with cm as vs:
                self._scope_name = vs.name
                self.built = True
                return self.call(inputs, state)
        with _fw.name_scope(self._scope_name.rsplit("/", 1)[-1]):
            return self.call(inputs, state)

    @property
    def variables(self):
        return [v for c in self._cells for v in c.variables]

    def call(self, inputs, state):
        cur, new_states, start = inputs, [], 0
        for i, cell in enumerate(self._cells):
            with _fw.variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not isinstance(state, (tuple, list)):
                        raise ValueError(f"Expected state to be a tuple of length {len(self._cells)}, but received: "
                                         f"{state}")
                    s = state[i]
                else:
                    size = int(cell.state_size)
                    s = _array.slice(state, [0, start], [-1, size])
                    start += size
                cur, ns = cell(cur, s)
                new_states.append(ns)
        return cur, (tuple(new_states) if self._state_is_tuple else _array.concat(new_states, 1))


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and (state_keep_prob) state;
    a keep probability of 1 adds no op."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):
        super().__init__()
        if variational_recurrent:
            raise NotImplementedError("DropoutWrapper(variational_recurrent=True) is not supported yet")
        for name, p in (("input", input_keep_prob), ("output", output_keep_prob), ("state", state_keep_prob)):
            if isinstance(p, (int, float)) and not 0.0 < float(p) <= 1.0:
                raise ValueError(f"DropoutWrapper: Parameter {name}_keep_prob must be between 0 and 1: {p}")
        self._cell = cell
        self._in, self._out, self._st = input_keep_prob, output_keep_prob, state_keep_prob
        self._seed = seed

    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)
    variables = property(lambda self: self._cell.variables)
    wrapped_cell = property(lambda self: self._cell)

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    def _drop(self, x, keep):
        if isinstance(keep, (int, float)) and float(keep) == 1.0:
            return x
        from distflow import nn
        return nn.dropout(x, keep_prob=keep, seed=self._seed)

    def __call__(self, inputs, state, scope=None):
        inputs = self._drop(_fw.convert_to_tensor(inputs), self._in)
        output, new_state = self._cell(inputs, state, scope=scope)
        if not (isinstance(self._st, (int, float)) and float(self._st) == 1.0):
            # As TF's default filter: an LSTM's memory c is not dropped.
            if isinstance(new_state, LSTMStateTuple):
                new_state = LSTMStateTuple(new_state.c, self._drop(new_state.h, self._st))
            else:
                new_state = _map(lambda s: self._drop(s, self._st), new_state)
        return self._drop(output, self._out), new_state


class ResidualWrapper(RNNCell):
    """The cell's output plus its input."""

    def __init__(self, cell, residual_fn=None):
        super().__init__()
        self._cell, self._fn = cell, residual_fn

    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)

    def zero_state(self, batch_size, dtype):
        return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        inputs = _fw.convert_to_tensor(inputs)
        out, new_state = self._cell(inputs, state, scope=scope)
        return (self._fn(inputs, out) if self._fn else inputs + out), new_state


# ---- RNN functions ----------------------------------------------------------------------

def _initial_state(cell, first_input, initial_state, dtype, who):
    if initial_state is not None:
        return initial_state
    if dtype is None:
        raise ValueError(f"{who}: If no initial_state is provided, dtype must be specified")
    return cell.zero_state(_static_batch_or_tensor(first_input), dtype)


def _unroll(cell, inputs, state, sequence_length):
    """Runs the cell over the list `inputs`; past each sequence's length its
    output is zero and its state carried through."""
    outputs = []
    zero = None
    if sequence_length is not None:
        sequence_length = _math.cast(_fw.convert_to_tensor(sequence_length), _dtypes.int32)
        if sequence_length.shape.ndims not in (None, 1):
            raise ValueError(f"sequence_length must be a vector of length batch_size, but saw shape: "
                             f"{sequence_length.shape}")
    for t, x in enumerate(inputs):
        x = _fw.convert_to_tensor(x)
        out, new_state = cell(x, state)
        if sequence_length is not None:
            with _fw.name_scope("time_%d" % t):
                done = _math.less_equal(sequence_length, t)
                if zero is None:
                    zero = _array.zeros_like(out)
                out = _array.where(done, zero, out)
                new_state = _map(lambda old, new: _array.where(done, old, new), state, new_state)
        outputs.append(out)
        state = new_state
    return outputs, state


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """tf.nn.static_rnn: `inputs` a list of [batch, depth] tensors; returns
    (the list of outputs, the final state). With sequence_length, outputs
    past a sequence's end are zero and its state is the one at its end."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("static_rnn: inputs must be a list of [batch, depth] tensors")
    if not inputs:
        raise ValueError("static_rnn: inputs must not be empty")
    with _fw.variable_scope(scope or "rnn"):
        first = _fw.convert_to_tensor(inputs[0])
        state = _initial_state(cell, first, initial_state, dtype, "static_rnn")
        return _unroll(cell, inputs, state, sequence_length)


def _time_steps(x, time_major, who):
    x = _fw.convert_to_tensor(x)
    dims = x.shape._dims
    axis = 0 if time_major else 1
    if dims is None or len(dims) < 3:
        raise ValueError(f"{who}: inputs must be [batch, time, depth] (or [time, batch, depth] if time_major); "
                         f"got '{x.name}' of shape {x.shape}")
    return x, axis, dims[axis]


def _loop_over_time(cell, x, axis, sequence_length, initial_state, dtype, parallel_iterations, who):
    """dynamic_rnn as TF builds it: a while_loop over the time steps reading
    the inputs from a TensorArray and writing the outputs to another."""
    from distflow import control_flow_ops
    from distflow import tensor_array_ops
    rank = len(x.shape._dims)
    xt = x if axis == 0 else _array.transpose(x, [1, 0] + list(range(2, rank)))
    dims = xt.shape._dims
    steps = _array.shape(xt)[0]
    first = xt[0]
    state = _initial_state(cell, first, initial_state, dtype, who)
    # The cell makes its variables here, outside the loop (distflow's loop
    # gradient does not reach a variable first made inside the body); this
    # step's ops go unused.
    cell(first, state)
    out_size = cell.output_size
    if not isinstance(out_size, int):
        raise NotImplementedError(f"{who} over a while_loop: cells whose output_size is {out_size!r} (not an int)")
    out_dtype = _flatten(state)[0].dtype
    inputs_ta = tensor_array_ops.TensorArray(xt.dtype, size=steps, element_shape=dims[1:]).unstack(xt)
    outputs_ta = tensor_array_ops.TensorArray(out_dtype, size=steps, element_shape=[dims[1], out_size])
    if sequence_length is not None:
        sequence_length = _math.cast(_fw.convert_to_tensor(sequence_length), _dtypes.int32)
        if sequence_length.shape.ndims not in (None, 1):
            raise ValueError(f"sequence_length must be a vector of length batch_size, but saw shape: "
                             f"{sequence_length.shape}")

    def body(t, out_ta, st):
        x_t = inputs_ta.read(t)
        out, new_st = cell(x_t, st)
        if sequence_length is not None:
            done = _math.less_equal(sequence_length, t)
            out = _array.where(done, _array.zeros_like(out), out)
            new_st = _map(lambda old, new: _array.where(done, old, new), st, new_st)
        return t + 1, out_ta.write(t, out), new_st

    state_invariants = _map(lambda v: [None] * (len(v.shape._dims) - 1) + [v.shape._dims[-1]]
                            if v.shape._dims else v.shape._dims, state)
    _, outputs_ta, state = control_flow_ops.while_loop(
        lambda t, *_: _math.less(t, steps), body, [_fw.constant(0, name="time"), outputs_ta, state],
        shape_invariants=[[], None, state_invariants], parallel_iterations=parallel_iterations or 32)
    outputs = outputs_ta.stack()
    if dims[0] is not None:
        outputs.set_shape([dims[0], None, out_size])
    if axis != 0:
        outputs = _array.transpose(outputs, [1, 0, 2])
    return outputs, state


def _dynamic(cell, inputs, sequence_length, initial_state, dtype, time_major, who, parallel_iterations=None):
    x, axis, steps = _time_steps(inputs, time_major, who)
    if steps is None or USE_WHILE_LOOP:
        return _loop_over_time(cell, x, axis, sequence_length, initial_state, dtype, parallel_iterations, who)
    xs = _array.unstack(x, num=steps, axis=axis)
    state = _initial_state(cell, xs[0], initial_state, dtype, who)
    outputs, state = _unroll(cell, xs, state, sequence_length)
    return _array.stack(outputs, axis=axis), state


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None, parallel_iterations=None,
                swap_memory=False, time_major=False, scope=None):
    """tf.nn.dynamic_rnn: inputs [batch, time, depth] ([time, batch, depth]
    if time_major); returns (outputs of the same layout, final state). A
    while_loop over the time steps when their number is unknown (or
    USE_WHILE_LOOP), else unrolled over the static number."""
    with _fw.variable_scope(scope or "rnn"):
        return _dynamic(cell, inputs, sequence_length, initial_state, dtype, time_major, "dynamic_rnn",
                        parallel_iterations)


def _reverse(xs, sequence_length):
    """The list of [batch, ...] steps reversed in time, each sequence within
    its own length when sequence_length is given (tf.reverse_sequence)."""
    if sequence_length is None:
        return list(reversed(xs))
    steps = len(xs)
    lengths = _math.cast(_fw.convert_to_tensor(sequence_length), _dtypes.int32)
    out = []
    for t in range(steps):
        # step t of the reversed sequence b is its step len_b - 1 - t (t < len_b), else step t.
        src = lengths - 1 - t
        picked = xs[t]
        for s in range(steps):
            picked = _array.where(_math.equal(src, s), xs[s], picked)
        out.append(picked)
    return out


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None, initial_state_bw=None, dtype=None,
                             sequence_length=None, scope=None):
    """tf.nn.static_bidirectional_rnn: (outputs, state_fw, state_bw), each
    output the concatenation of the forward and the (re-reversed) backward one."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("static_bidirectional_rnn: inputs must be a non-empty list of [batch, depth] tensors")
    inputs = [_fw.convert_to_tensor(x) for x in inputs]
    with _fw.variable_scope(scope or "bidirectional_rnn"):
        with _fw.variable_scope("fw"):
            out_fw, st_fw = _unroll(cell_fw, inputs, _initial_state(cell_fw, inputs[0], initial_state_fw, dtype,
                                                                    "static_bidirectional_rnn"), sequence_length)
        with _fw.variable_scope("bw"):
            rev = _reverse(inputs, sequence_length)
            out_bw, st_bw = _unroll(cell_bw, rev, _initial_state(cell_bw, inputs[0], initial_state_bw, dtype,
                                                                 "static_bidirectional_rnn"), sequence_length)
            out_bw = _reverse(out_bw, sequence_length)
    return [_array.concat([f, b], 1) for f, b in zip(out_fw, out_bw)], st_fw, st_bw


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None, initial_state_fw=None,
                              initial_state_bw=None, dtype=None, parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """tf.nn.bidirectional_dynamic_rnn: ((output_fw, output_bw), (state_fw,
    state_bw)); unrolled over the static time dimension as dynamic_rnn."""
    who = "bidirectional_dynamic_rnn"
    x, axis, steps = _time_steps(inputs, time_major, who)
    if steps is None:
        raise NotImplementedError(f"{who} on '{x.name}' of shape {x.shape}: an unknown number of time steps "
                                  f"(only dynamic_rnn runs a while_loop in distflow yet)")
    xs = _array.unstack(x, num=steps, axis=axis)
    with _fw.variable_scope(scope or "bidirectional_rnn"):
        with _fw.variable_scope("fw"):
            out_fw, st_fw = _unroll(cell_fw, xs, _initial_state(cell_fw, xs[0], initial_state_fw, dtype, who),
                                    sequence_length)
        with _fw.variable_scope("bw"):
            out_bw, st_bw = _unroll(cell_bw, _reverse(xs, sequence_length),
                                    _initial_state(cell_bw, xs[0], initial_state_bw, dtype, who), sequence_length)
            out_bw = _reverse(out_bw, sequence_length)
    return (_array.stack(out_fw, axis=axis), _array.stack(out_bw, axis=axis)), (st_fw, st_bw)


_CELL_NAMES = ("RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell", "DropoutWrapper",
               "ResidualWrapper", "LSTMStateTuple")


def cell_namespace(prefix):
    """A module of the cell classes (tf.nn.rnn_cell); other names raise
    NotImplementedError naming them."""
    import types

    class _CellModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            raise NotImplementedError(f"distflow.compat.v1 has no tf.{prefix}.{name} yet")

    m = _CellModule(f"distflow.{prefix}")
    for n in _CELL_NAMES:
        setattr(m, n, globals()[n])
    return m
