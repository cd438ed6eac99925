"""TF1's control flow: tf.cond, tf.case and tf.while_loop, over the C++
ops::Cond and ops::WhileLoop (distflow/control_flow.h), which build
TensorFlow's dataflow form (Switch/Merge, Enter/Merge/LoopCond/Switch/
NextIteration/Exit) that the executor runs with frames and iterations.

While a branch, a loop condition or a loop body is being built, the graph
keeps a context for it (Graph._cf_stack): ops made then use the C++ scope
of the branch or body (so they run after its pivot, in its frame), and a
tensor they read from outside is captured: switched on the predicate for a
branch, entered into the frame for a loop (ops::CaptureIntoLoop, so
Gradients passes its gradient out). Loop variables may be nested lists,
tuples, namedtuples and dicts of tensors and TensorArrays.

A loop's gradient is C++'s: it rebuilds the body on every iteration's saved
values, so the body is called again by tf.gradients (it must build the same
ops from the same inputs). The variables get_variable made on the body's
first call (directly or through tf.layers or an RNN cell) are handed out
again, in the same order, while it is rebuilt, so a body that makes its
variables without reuse works and its variables get their gradients.
"""
import contextlib

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import framework as _fw


# ---- nested structures: lists, tuples, namedtuples and dicts (sorted keys) ----

def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _flatten(s):
    if isinstance(s, dict):
        return [c for k in sorted(s) for c in _flatten(s[k])]
    if isinstance(s, (list, tuple)):
        return [c for e in s for c in _flatten(e)]
    return [s]


def _pack(template, flat):
    it = iter(flat)

    def build(t):
        if isinstance(t, dict):
            built = {k: build(t[k]) for k in sorted(t)}
            return type(t)((k, built[k]) for k in t)
        if _is_namedtuple(t):
            return type(t)(*[build(e) for e in t])
        if isinstance(t, (list, tuple)):
            return type(t)(build(e) for e in t)
        return next(it)

    return build(template)


def _flatten_up_to(template, s):
    """`s`'s parts where `template` has leaves (a shape invariant is a list
    itself, a leaf)."""
    if isinstance(template, dict):
        if not isinstance(s, dict):
            raise ValueError(f"tf.while_loop: shape_invariants {s!r} do not have the structure of the loop variables")
        return [c for k in sorted(template) for c in _flatten_up_to(template[k], s[k])]
    if isinstance(template, (list, tuple)):
        if not isinstance(s, (list, tuple)) or len(s) != len(template):
            raise ValueError(f"tf.while_loop: shape_invariants {s!r} do not have the structure of the loop variables")
        return [c for t, e in zip(template, s) for c in _flatten_up_to(t, e)]
    return [s]


def _same_structure(a, b):
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b) and \
            all(_same_structure(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) and \
            all(_same_structure(x, y) for x, y in zip(a, b))
    return True


def _is_tensor_array(x):
    from distflow import tensor_array_ops
    return isinstance(x, tensor_array_ops.TensorArray)


# ---- contexts --------------------------------------------------------------

class _Context:
    """A branch, loop condition or loop body being built: its C++ scope, its
    enclosing context, and the tensors from outside captured into it."""

    def __init__(self, graph):
        self.graph = graph
        self.parent = graph._cf_stack[-1] if graph._cf_stack else None
        self.scope = None
        self.control_mark = len(graph._control_stack)
        self.captured = {}  # outside tensor's name -> its value inside

    def _encloses(self, home):
        c = self.parent
        while c is not None:
            if c is home:
                return True
            c = c.parent
        return home is None

    def capture(self, t):
        g = self.graph
        home = g._tensor_ctx.get(t.name)
        if home is self:
            return t
        inner = self.captured.get(t.name)
        if inner is not None:
            return inner
        if not self._encloses(home):
            return t
        outer = self.parent.capture(t) if self.parent is not None else t
        inner = self._make_capture(outer)
        g._tensor_ctx[inner.name] = self
        self.captured[t.name] = inner
        self._captured_new(t.name)
        return inner

    def _captured_new(self, name):
        pass

    @contextlib.contextmanager
    def outside(self):
        """Ops made here belong to the contexts around this one."""
        g = self.graph
        saved = g._cf_stack
        g._cf_stack = saved[:saved.index(self)] if self in saved else list(saved)
        try:
            yield
        finally:
            g._cf_stack = saved

    @contextlib.contextmanager
    def active(self, scope):
        self.scope = scope
        self.graph._cf_stack.append(self)
        try:
            yield self
        finally:
            self.graph._cf_stack.pop()

    def adopt(self, cc_outputs):
        """C++ outputs made inside this context, as Tensors of it."""
        out = []
        for o in cc_outputs:
            t = _fw.Tensor(o, self.graph)
            self.graph._tensor_ctx[t.name] = self
            out.append(t)
        return out


class _BranchContext(_Context):
    """One side of a tf.cond: outside tensors come through a Switch on the
    predicate (its output `branch`: 1 true, 0 false)."""

    def __init__(self, graph, pred, branch):
        super().__init__(graph)
        self.pred = pred
        self.branch = branch

    def _make_capture(self, outer):
        with self.outside():
            switch = _fw._apply("Switch", [outer, self.pred])
        return switch[self.branch]


class _Loop:
    """What a loop's condition and body contexts share: the outside tensors
    entered into the frame, in the order C++ recorded them."""

    def __init__(self):
        self.captured = {}
        self.order = []
        self.built = False
        self.made = []  # (name, variable): the variables get_variable made in the body's first build


class _LoopContext(_Context):
    def __init__(self, graph, loop, captured):
        super().__init__(graph)
        self.loop = loop
        self.captured = captured

    def _make_capture(self, outer):
        return _fw.Tensor(_distflow.capture_into_loop(self.scope, outer._out), self.graph)

    def _captured_new(self, name):
        if not self.loop.built:
            self.loop.order.append(name)


def _adopt_outside(graph, cc_outputs):
    """Results of a cond or loop, as Tensors of the context it was built in."""
    ctx = graph._cf_stack[-1] if graph._cf_stack else None
    if ctx is not None:
        return ctx.adopt(cc_outputs)
    return [_fw.Tensor(o, graph) for o in cc_outputs]


# ---- tf.cond and tf.case -----------------------------------------------------

def _branch_outputs(ctx, result, what):
    """A branch's result as flat tensors of the branch (an Operation becomes a
    scalar made after it; a TensorArray its handle and its flow, so the
    array the taken branch gives, its own or one from outside, comes out)."""
    from distflow import array_ops
    flat = []
    for x in _flatten(result):
        if x is None:
            raise ValueError(f"tf.cond: the {what} branch returned None; both branches must return tensors")
        if _is_tensor_array(x):
            flat += [array_ops.identity(x.handle), array_ops.identity(x.flow)]
            continue
        if isinstance(x, _fw.Operation):
            with _fw.control_dependencies([x]):
                x = _fw.constant(True)
        x = _fw.convert_to_tensor(x)
        flat.append(array_ops.identity(x))  # captured (switched) if it comes from outside
    return flat


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """tf.cond: true_fn() if pred else false_fn(); only the taken branch runs.
    Both must return the same structure of tensors of the same dtypes."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if not callable(true_fn):
        raise TypeError("tf.cond: true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("tf.cond: false_fn must be callable.")
    g = _fw.get_default_graph()
    pred = _fw.convert_to_tensor(pred)
    if pred.dtype != _dtypes.bool:
        raise TypeError(f"tf.cond: pred '{pred.name}' must be a bool tensor, not {pred.dtype.name}")
    if pred.shape.ndims not in (None, 0):
        raise ValueError(f"tf.cond: pred '{pred.name}' must be a scalar, not of shape {pred.shape}")
    parent = g._cf_stack[-1] if g._cf_stack else None
    if parent is not None:
        pred = parent.capture(pred)
    structures, ops_returned = {}, {}

    def make(branch, fn, what):
        def build(scope):
            ctx = _BranchContext(g, pred, branch)
            with ctx.active(scope):
                result = fn()
                structures[branch] = result
                ops_returned[branch] = isinstance(result, _fw.Operation)
                return [t._out for t in _branch_outputs(ctx, result, what)]
        return build

    def check_structures():
        if not _same_structure(structures[1], structures[0]):
            raise ValueError(f"tf.cond: the branches return different structures: {structures[1]!r} and "
                             f"{structures[0]!r}")
        for a, b in zip(_flatten(structures[1]), _flatten(structures[0])):
            if _is_tensor_array(a) != _is_tensor_array(b):
                other = b if _is_tensor_array(a) else a
                raise TypeError(f"tf.cond: one branch returns a TensorArray where the other returns {other!r}; "
                                f"both must return a TensorArray there")

    try:
        outs = _distflow.cond(g._scope(), pred._out, make(1, true_fn, "true"), make(0, false_fn, "false"))
    except _distflow.InvalidArgumentError:
        if len(structures) == 2:
            check_structures()  # the clearer error, if that is the cause
        raise
    check_structures()
    leaves_t = _flatten(structures[1])
    merged = _adopt_outside(g, outs)
    if ops_returned[1] and ops_returned[0]:
        return merged[0].op
    it = iter(merged)
    results = []
    for a in leaves_t:
        if _is_tensor_array(a):
            handle, flow = next(it), next(it)
            ta = a._with_flow(flow)
            ta._handle = handle
            results.append(ta)
        else:
            results.append(next(it))
    packed = _pack(structures[1], results)
    if strict:
        return packed
    return packed[0] if isinstance(packed, (list, tuple)) and len(packed) == 1 and \
        not _is_namedtuple(packed) else packed


def Assert(condition, data, summarize=None, name=None):
    """tf.Assert: an op that fails the step with InvalidArgumentError
    ("assertion failed: [data0] [data1] ...", each tensor's first
    `summarize` elements) when `condition` is false."""
    from distflow import raw_ops
    condition = _fw.convert_to_tensor(condition)
    if condition.dtype != _dtypes.bool:
        raise TypeError(f"tf.Assert: condition '{condition.name}' must be bool, not {condition.dtype.name}")
    data = [_fw.convert_to_tensor(d) for d in data]
    return raw_ops.Assert(condition=condition, data=data, summarize=3 if summarize is None else int(summarize),
                          name=name)


def _assert_at_most_one_true(preds):
    """TensorFlow's check of tf.case(exclusive=True): an Assert naming the
    predicates, with their values, when more than one holds."""
    from distflow import array_ops, math_ops
    with _fw.name_scope("exclusive"):
        stacked = array_ops.stack(preds, name="preds_c")
        count = math_ops.reduce_sum(math_ops.cast(stacked, _dtypes.int32), name="num_true_conds")
        names = ", ".join(p.name for p in preds)
        return Assert(math_ops.less_equal(count, 1),
                      [f"Input error: exclusive=True: more than 1 conditions ({names}) evaluated as True:", stacked],
                      summarize=len(preds))


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """tf.case: the fn of the first pair whose pred holds, else default()
    (nested conds). With exclusive=True, more than one true pred fails the
    step with an InvalidArgumentError naming the preds, as in TensorFlow."""
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    pairs = list(pred_fn_pairs)
    for p in pairs:
        if not isinstance(p, tuple) or len(p) != 2 or not callable(p[1]):
            raise TypeError(f"tf.case: each pair must be (bool tensor, callable), got {p!r}")
    pairs_all = list(pairs)
    if default is None:
        if not pairs:
            raise ValueError("tf.case: no pairs and no default")
        pairs, default = pairs[:-1], pairs[-1][1]
    with _fw.name_scope(name):
        def chain(i):
            if i == len(pairs):
                return default()
            p, f = pairs[i]
            return cond(p, f, lambda: chain(i + 1), strict=strict)
        if not exclusive or len(pairs_all) < 2:
            return chain(0)
        preds = [_fw.convert_to_tensor(p) for p, _ in pairs_all]
        check = _assert_at_most_one_true(preds)
        result = chain(0)
        if isinstance(result, _fw.Operation):
            return _fw.group(result, check)
        from distflow import array_ops
        with _fw.control_dependencies([check]):
            return _pack(result, [array_ops.identity(t) for t in _flatten(result)]) \
                if isinstance(result, (list, tuple, dict)) else array_ops.identity(result)


# ---- tf.while_loop -----------------------------------------------------------

def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,
               swap_memory=False, name=None, maximum_iterations=None, return_same_structure=False):
    """tf.while_loop: repeats `loop_vars = body(*loop_vars)` while
    cond(*loop_vars); returns the final loop_vars (one tensor when there is
    one, unless return_same_structure)."""
    from distflow import math_ops
    if not callable(cond):
        raise TypeError("tf.while_loop: cond must be callable.")
    if not callable(body):
        raise TypeError("tf.while_loop: body must be callable.")
    if parallel_iterations < 1:
        raise TypeError("tf.while_loop: parallel_iterations must be a positive integer.")
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError(f"tf.while_loop: loop_vars must be a list or tuple, not {type(loop_vars).__name__}")
    if not _flatten(loop_vars):
        raise ValueError("tf.while_loop: no loop variables provided")
    g = _fw.get_default_graph()
    parent = g._cf_stack[-1] if g._cf_stack else None
    leaves = _flatten(loop_vars)
    leaves = [x if _is_tensor_array(x) else _fw.convert_to_tensor(x) for x in leaves]
    template = _pack(loop_vars, leaves)
    # A TensorArray is carried by its flow (a float scalar); its handle is
    # captured into the loop where the body uses it.
    flat = [x.flow if _is_tensor_array(x) else x for x in leaves]
    n = len(flat)
    invariants = None
    if shape_invariants is not None:
        inv = _flatten_up_to(loop_vars, shape_invariants)
        if len(inv) != n:
            raise ValueError(f"tf.while_loop: {len(inv)} shape invariants for {n} loop variables")
        invariants = []
        for x, sh in zip(leaves, inv):
            invariants.append([] if _is_tensor_array(x) else _fw._shape_list(sh))
    elif any(_is_tensor_array(x) for x in leaves):
        invariants = [[] if _is_tensor_array(x) else x.shape._dims for x in leaves]
    counter = maximum_iterations is not None
    if counter:
        with _fw.name_scope(name or "while"):
            max_t = _fw.convert_to_tensor(maximum_iterations, dtype=_dtypes.int32)
            flat = [_fw.constant(0, name="iteration_counter")] + flat
        if invariants is not None:
            invariants = [[]] + invariants
    loop = _Loop()
    first = 1 if counter else 0

    def unpack(ctx, cc_vars):
        tensors = ctx.adopt(cc_vars[:n + first])
        users = [ta._with_flow(t) if _is_tensor_array(ta) else t for ta, t in zip(leaves, tensors[first:])]
        return tensors[:first], _pack(template, users)

    # Per C++ loop variable: the gradient can do without its values (a
    # TensorArray's flow: the values are in the array), so the loop keeps no
    # history of it.
    flow_var = [False] * first + [_is_tensor_array(x) for x in leaves]
    shape_varies = [False] * (n + first)

    def history_not_needed(i):
        return flow_var[i]

    def context(scope, cc_vars):
        if not loop.built:
            return _LoopContext(g, loop, loop.captured)
        # Rebuilt by Gradients: the captured tensors are the last of cc_vars.
        ctx = _LoopContext(g, loop, {})
        extra = cc_vars[n + first:]
        for k, cname in enumerate(loop.order[:len(extra)]):
            t = _fw.Tensor(extra[k], g)
            g._tensor_ctx[t.name] = ctx
            ctx.captured[cname] = t
        return ctx

    def cond_fn(scope, cc_vars):
        ctx = context(scope, cc_vars)
        with ctx.active(scope):
            count, user = unpack(ctx, cc_vars)
            c = _fw.convert_to_tensor(cond(*user) if isinstance(user, (list, tuple)) else cond(user))
            if c.dtype != _dtypes.bool:
                raise TypeError(f"tf.while_loop: cond returned '{c.name}' of dtype {c.dtype.name}, not bool")
            c = ctx.capture(c)
            if counter:
                c = math_ops.logical_and(math_ops.less(count[0], max_t), c)
            return c._out

    @contextlib.contextmanager
    def variables_of_the_body():
        # The first build records the variables the body makes; a rebuild
        # (for the gradient) is handed the same ones.
        rebuilt = loop.built
        if rebuilt:
            g._var_replay.append(_fw._VariableReplay(loop.made))
        else:
            g._var_logs.append(loop.made)
        try:
            yield
        finally:
            (g._var_replay if rebuilt else g._var_logs).pop()

    def body_fn(scope, cc_vars):
        ctx = context(scope, cc_vars)
        with ctx.active(scope), variables_of_the_body():
            count, user = unpack(ctx, cc_vars)
            result = body(*user) if isinstance(user, (list, tuple)) else body(user)
            if not isinstance(result, (list, tuple, dict)) or _is_tensor_array(result):
                result = [result]
            if isinstance(template, tuple) and isinstance(result, list) and not _is_namedtuple(template):
                result = tuple(result)
            if not _same_structure(template, result):
                raise ValueError(f"tf.while_loop: the body returns {result!r}, a structure different from "
                                 f"loop_vars {template!r}")
            out = []
            for k, (x, want) in enumerate(zip(_flatten(result), leaves)):
                if _is_tensor_array(want):
                    if not _is_tensor_array(x):
                        raise TypeError(f"tf.while_loop: the body returns {x!r} for a TensorArray loop variable")
                    x = x.flow
                else:
                    x = _fw.convert_to_tensor(x, dtype=want.dtype)
                out.append(ctx.capture(x))
            if counter:
                out = [math_ops.add(count[0], 1)] + out
            return [t._out for t in out]

    try:
        cc_out = _distflow.while_loop(g._scope(), [t._out for t in flat], cond_fn, body_fn, invariants, -1,
                                      int(parallel_iterations), bool(back_prop), name or "while",
                                      history_not_needed, shape_varies)
    finally:
        loop.built = True
    outs = _adopt_outside(g, cc_out)[first:]
    finals = [ta._with_flow(t) if _is_tensor_array(ta) else t for ta, t in zip(leaves, outs)]
    result = _pack(template, finals)
    if not return_same_structure and isinstance(result, (list, tuple)) and len(_flatten(result)) == 1 \
            and not _is_namedtuple(result):
        return _flatten(result)[0]
    return result
