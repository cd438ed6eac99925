"""Graphs, tensors, devices and sessions with TensorFlow 1.x semantics, over
the C++ Scope, Session and Server (distflow._distflow).

A Graph wraps a root C++ Scope. The context managers (device, name_scope,
control_dependencies) keep a per-graph stack; every op is added through the
Scope those build, so placement, naming and shape checks are C++'s.
"""
import contextlib
import threading

import numpy as np

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import errors
from distflow import graph_keys as _graph_keys

# ---- graphs -----------------------------------------------------------------


class Graph:
    """A dataflow graph (tf.Graph): nodes are added by op functions while the
    graph is the default one."""

    def __init__(self):
        self._root = _distflow.Scope.new_root()
        self._name_stack = []      # name scopes, outermost first
        self._device_stack = []    # device strings or functions, outermost first
        self._control_stack = []   # lists of Operations
        self._colocate = []        # "loc:@name" classes given to every op added (tf.Variable(callable))
        self._collections = {}
        self._finalized = False
        self._variables = {}       # get_variable's, by full name
        self._var_scope = []       # (name, reuse) of the open variable scopes
        self._local_variable_ops = set()  # names of the LOCAL_VARIABLES' ops
        self.seed = None           # tf.set_random_seed's graph seed
        self._last_id = 0          # ops added so far: the op seed of a seedless random op
        # tf.cond branches and tf.while_loop conditions and bodies being built,
        # innermost last (control_flow_ops.py), and the context each tensor
        # made inside one belongs to, by tensor name (absent: the graph's top).
        self._cf_stack = []
        self._tensor_ctx = {}
        # Variables get_variable made while a while_loop body was first built
        # (one list per loop being built, appended to by all), and the lists
        # to hand them out again from while a body is rebuilt for its
        # gradient (control_flow_ops.py).
        self._var_logs = []
        self._var_replay = []
        self._var_depth = 0

    @contextlib.contextmanager
    def as_default(self):
        _default_stack.stack.append(self)
        try:
            yield self
        finally:
            _default_stack.stack.pop()

    def finalize(self):
        self._finalized = True

    @property
    def finalized(self):
        return self._finalized

    def add_to_collection(self, name, value):
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value):
        for name in ([names] if isinstance(names, str) else set(names)):
            self.add_to_collection(name, value)

    def get_collection(self, name, scope=None):
        """The collection's items in the order added; with `scope`, those
        whose name matches it from the start (a regular expression), as TF."""
        items = list(self._collections.get(name, []))
        if scope is None:
            return items
        import re
        pattern = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and pattern.match(i.name)]

    def get_collection_ref(self, name):
        return self._collections.setdefault(name, [])

    def get_all_collection_keys(self):
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name):
        self._collections.pop(name, None)

    def as_graph_def(self, from_version=None, add_shapes=False):
        """The graph as distflow's GraphDef (proto/graph.proto: `node` with
        `name`, `op`, `input`, `device`, `attr`), as TF's Graph.as_graph_def
        returns TensorFlow's. Its fields are distflow's, not TensorFlow's
        numbering: serialized, it is read by distflow (import_graph_def,
        meta graphs), not by TensorFlow."""
        del from_version, add_shapes
        from distflow.proto import graph_pb2
        graph_def = graph_pb2.GraphDef()
        graph_def.ParseFromString(_distflow.graph_def(self._root))
        return graph_def

    def get_operations(self):
        """Every operation of the graph, in the order they were added."""
        return [Operation(self._root.find_operation(n.name), self) for n in self.as_graph_def().node]

    def get_operation_by_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings, not {type(name).__name__}")
        if ":" in name:
            raise ValueError(f"The name '{name}' appears to refer to a Tensor, not an Operation.")
        op = self._root.find_operation(name)
        if op is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.")
        return Operation(op, self)

    def get_tensor_by_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings, not {type(name).__name__}")
        op_name, colon, index = name.rpartition(":")
        if not colon or not index.isdigit():
            raise ValueError(f"The name '{name}' looks like an Operation name, not a Tensor. Tensor names "
                             f"must be of the form \"<op_name>:<output_index>\".")
        op = self._root.find_operation(op_name)
        if op is None:
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                           f"'{op_name}', does not exist in the graph.")
        if int(index) >= op.num_outputs:
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                           f"'{op_name}', exists but only has {op.num_outputs} outputs.")
        return Tensor(_distflow.Output(op, int(index), self._root), self)

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        """A Tensor or Operation of this graph from itself or its name
        ("name:0" names a tensor, "name" an operation)."""
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                return self.get_tensor_by_name(obj)
            if ":" not in obj and allow_operation:
                return self.get_operation_by_name(obj)
            want = "a Tensor" if allow_tensor else "an Operation"
            raise ValueError(f"The name '{obj}' does not name {want} of this graph")
        if isinstance(obj, Tensor) and allow_tensor:
            return obj
        if isinstance(obj, Operation) and allow_operation:
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a graph element")

    def _scope(self, name=None, op_type=None, exact=False):
        """The C++ Scope for the next op: name scope, devices, control deps.
        `exact`: `name` is already unique (reserved with _unique_name)."""
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified (a Supervisor or "
                               "MonitoredSession finalized it; build ops before creating one).")
        s = self._root
        control_groups = self._control_stack
        if self._cf_stack:
            # Inside a branch or loop body: its C++ scope (its pivot or frame),
            # and only the control dependencies opened inside it.
            ctx = self._cf_stack[-1]
            s = ctx.scope
            control_groups = control_groups[ctx.control_mark:] if len(control_groups) > ctx.control_mark else []
        for d in self._device_stack:
            if d is None:
                s = s.with_device("")
            elif isinstance(d, str):
                s = s.with_device(d)
            else:
                s = s.with_device_function(d)
        deps = [op for group in control_groups for op in group]
        if deps:
            s = s.with_control_dependencies(deps)
        prefix = "/".join(self._name_stack)
        if name is not None:
            full = f"{prefix}/{name}" if prefix else name
            if self._cf_stack:
                # Unique under the branch's or body's own name scope, which prefixes it.
                u = s.unique_name(full)
                s = s.with_op_name(full if u.endswith("/" + full) else u[u.rfind("/" + full + "_") + 1:])
            else:
                s = s.with_op_name(full if exact else self._unique_name(full))
        elif prefix:
            s = s.new_sub_scope(prefix)
        return s

    def _unique_name(self, name):
        # TensorFlow: "x", then "x_1", "x_2", ...
        return self._root.unique_name(name)

    @contextlib.contextmanager
    def _outside_control_flow(self):
        """Ops made here (variables and their initializers) belong to the
        graph's top, whatever tf.cond or tf.while_loop is being built."""
        saved, self._cf_stack = self._cf_stack, []
        try:
            yield
        finally:
            self._cf_stack = saved

    @property
    def graph_key(self):
        return self._root.graph_key


class _DefaultStack(threading.local):
    def __init__(self):
        super().__init__()
        self.stack = []


_default_stack = _DefaultStack()
_global_default_graph = Graph()


def get_default_graph():
    if _default_stack.stack:
        return _default_stack.stack[-1]
    return _global_default_graph


def reset_default_graph():
    global _global_default_graph
    if _default_stack.stack:
        raise AssertionError("reset_default_graph inside a `with graph.as_default()` block")
    _global_default_graph = Graph()


GraphKeys = _graph_keys.GraphKeys


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)


@contextlib.contextmanager
def device(device_name_or_function):
    """tf.device: a device string ("/job:ps/task:0"), a device function
    (node -> device string, e.g. replica_device_setter), or None to clear."""
    g = get_default_graph()
    d = device_name_or_function
    if d is not None and not isinstance(d, str) and not callable(d):
        raise TypeError(f"tf.device takes a device string or a function, not {d!r}")
    if isinstance(d, str) or d is None or isinstance(d, _distflow.DeviceFunction):
        g._device_stack.append(d)
    else:
        g._device_stack.append(lambda node: d(_NodeForDeviceFunction(node)))
    try:
        yield
    finally:
        g._device_stack.pop()


class _NodeForDeviceFunction:
    """What a Python device function is given: TensorFlow's op fields."""

    def __init__(self, node):
        self.name = node.name
        self.type = node.type
        self.device = node.device
        self.node_def = self

    @property
    def op(self):  # node_def.op
        return self.type


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    g = get_default_graph()
    name = name or default_name
    if not name:
        yield ""
        return
    g._name_stack.append(name)
    try:
        yield "/".join(g._name_stack) + "/"
    finally:
        g._name_stack.pop()


@contextlib.contextmanager
def control_dependencies(control_inputs):
    g = get_default_graph()
    if control_inputs is None:
        saved, g._control_stack = g._control_stack, []
        try:
            yield
        finally:
            g._control_stack = saved
        return
    g._control_stack.append([_as_cc_operation(c) for c in control_inputs])
    try:
        yield
    finally:
        g._control_stack.pop()


# ---- tensors and operations ---------------------------------------------------


class Dimension(int):
    """A known dimension of a TensorShape (tf.Dimension): an int with .value."""

    @property
    def value(self):
        return int(self)


class TensorShape:
    def __init__(self, dims):
        self._dims = None if dims is None else list(dims)

    def as_list(self):
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    @property
    def ndims(self):
        return None if self._dims is None else len(self._dims)

    def __iter__(self):
        return iter(self._dims or [])

    def __len__(self):
        return len(self.as_list())

    def __getitem__(self, i):
        d = self.as_list()[i]
        if isinstance(i, slice):
            return TensorShape(d)
        return d if d is None else Dimension(d)

    def is_fully_defined(self):
        return self._dims is not None and all(d is not None for d in self._dims)

    def is_compatible_with(self, other):
        other = other if isinstance(other, TensorShape) else TensorShape(_shape_list(other))
        if self._dims is None or other._dims is None:
            return True
        return len(self._dims) == len(other._dims) and all(
            a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other):
        other = other if isinstance(other, TensorShape) else TensorShape(_shape_list(other))
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self._dims is None:
            return TensorShape(other._dims)
        if other._dims is None:
            return TensorShape(self._dims)
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def __eq__(self, other):
        other_dims = other._dims if isinstance(other, TensorShape) else list(other)
        return self._dims == other_dims

    def __repr__(self):
        return "TensorShape(<unknown>)" if self._dims is None else f"TensorShape({self._dims})"


class Operation:
    """A node of a graph (tf.Operation)."""

    def __init__(self, cc_op, graph):
        self._op = cc_op
        self.graph = graph

    name = property(lambda self: self._op.name)
    type = property(lambda self: self._op.type)
    device = property(lambda self: self._op.device)

    @property
    def outputs(self):
        return [Tensor(_distflow.Output(self._op, i, self.graph._root), self.graph)
                for i in range(self._op.num_outputs)]

    def run(self, feed_dict=None, session=None):
        (session or get_default_session()).run(self, feed_dict=feed_dict)

    # Two Operation objects of one node are the same operation (the graph
    # keeps nodes, not Python objects), so `op in graph.get_operations()`
    # and sets of operations work.
    def __eq__(self, other):
        return isinstance(other, Operation) and other.graph is self.graph and other.name == self.name

    def __hash__(self):
        return hash((id(self.graph), self.name))

    def __repr__(self):
        return f"<tf.Operation '{self.name}' type={self.type}>"


class Tensor:
    """An output of an Operation (tf.Tensor); arithmetic operators add ops."""

    def __init__(self, cc_output, graph):
        self._out = cc_output
        self.graph = graph

    name = property(lambda self: self._out.name)
    dtype = property(lambda self: _dtypes.as_dtype(self._out.dtype))
    op = property(lambda self: Operation(self._out.op, self.graph))
    device = property(lambda self: self._out.op.device)
    value_index = property(lambda self: self._out.index)

    @property
    def shape(self):
        return TensorShape(self._out.shape)

    def get_shape(self):
        return self.shape

    def set_shape(self, shape):
        """Refines the static shape (tf.Tensor.set_shape): the tensor becomes
        a Reshape of itself to the merged shape when that adds what the
        graph does not know (at most one dimension left unknown); a shape
        that contradicts the known one is a ValueError."""
        merged = self.shape.merge_with(shape)
        if merged._dims is None or merged == self.shape:
            return
        unknown = sum(d is None for d in merged._dims)
        if unknown > 1:
            return
        from distflow import array_ops
        with self.graph.as_default():
            t = array_ops.reshape(self, [-1 if d is None else d for d in merged._dims])
        self._out = t._out

    def eval(self, feed_dict=None, session=None):
        return (session or get_default_session()).run(self, feed_dict=feed_dict)

    def __repr__(self):
        return f"<tf.Tensor '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def __hash__(self):
        return hash((self._out.op, self._out.index))

    def __bool__(self):
        raise TypeError("Using a tf.Tensor as a Python bool is not allowed (the value is only known "
                        "when a session runs it).")

    # Arithmetic, as TensorFlow overloads it.
    def __add__(self, o): return _binary("Add", self, o)
    def __radd__(self, o): return _binary("Add", o, self)
    def __sub__(self, o): return _binary("Sub", self, o)
    def __rsub__(self, o): return _binary("Sub", o, self)
    def __mul__(self, o): return _binary("Mul", self, o)
    def __rmul__(self, o): return _binary("Mul", o, self)
    def __truediv__(self, o): return _binary("Div", self, o)
    def __rtruediv__(self, o): return _binary("Div", o, self)
    def __matmul__(self, o): return _binary("MatMul", self, o)
    def __neg__(self): return _apply("Neg", [self])
    def __lt__(self, o): return _binary("Less", self, o)
    def __gt__(self, o): return _binary("Greater", self, o)
    def __pow__(self, o): return _binary("Pow", self, o)
    def __rpow__(self, o): return _binary("Pow", o, self)
    def __rmatmul__(self, o): return _binary("MatMul", o, self)
    def __le__(self, o): return _binary("LessEqual", self, o)
    def __ge__(self, o): return _binary("GreaterEqual", self, o)
    def __abs__(self): return _apply("Abs", [self])
    def __and__(self, o): return _binary("LogicalAnd", self, o)
    def __rand__(self, o): return _binary("LogicalAnd", o, self)
    def __or__(self, o): return _binary("LogicalOr", self, o)
    def __ror__(self, o): return _binary("LogicalOr", o, self)
    def __invert__(self): return _apply("LogicalNot", [self])

    def __floordiv__(self, o):
        from distflow import math_ops
        return math_ops.floordiv(self, o)

    def __rfloordiv__(self, o):
        from distflow import math_ops
        return math_ops.floordiv(o, self)

    def __getitem__(self, key):
        from distflow import array_ops
        return array_ops.getitem(self, key)

    def __iter__(self):
        raise TypeError("Tensor objects are only iterable when eager execution is enabled. To iterate over "
                        "this tensor use tf.unstack or tf.map_fn.")


def _as_cc_operation(x):
    if isinstance(x, Operation):
        return x._op
    if isinstance(x, Tensor):
        return x._out.op
    raise TypeError(f"control inputs must be Operations or Tensors, not {x!r}")


def convert_to_tensor(value, dtype=None, name=None):
    """A Tensor as is (checking its dtype), or a constant of `value`."""
    if isinstance(value, Tensor):
        if dtype is not None and _dtypes.as_dtype(dtype) != value.dtype:
            raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} for Tensor "
                             f"'{value.name}' of dtype {value.dtype.name}")
        return value
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to a Tensor")
    if hasattr(value, "_as_dense_tensor"):  # an IndexedSlices (sparse_ops.py): its dense form
        return convert_to_tensor(value._as_dense_tensor(), dtype=dtype, name=name)
    return constant(value, dtype=dtype, name=name)


def _infer_dtype(value):
    arr = np.asarray(value)
    if arr.dtype.kind in ("U", "S", "O"):
        return _dtypes.string
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        return _dtypes.float32  # Python floats: TensorFlow's float32
    if arr.dtype == np.int64 and not isinstance(value, np.ndarray):
        return _dtypes.int32    # Python ints: TensorFlow's int32
    return _dtypes.as_dtype(arr.dtype)


def constant(value, dtype=None, shape=None, name="Const"):
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _infer_dtype(value)
    arr = np.asarray(value, dtype=object if dt == _dtypes.string else dt.as_numpy_dtype)
    if shape is not None:
        shape = list(shape)
        if arr.size == 1 and int(np.prod(shape)) != 1:
            arr = np.full(shape, arr.reshape(()).item(), dtype=arr.dtype)
        else:
            arr = arr.reshape(shape)
    return _apply("Const", [], {"value": (arr, dt._distflow_dtype), "dtype": dt._distflow_dtype}, name=name)


def _binary(op_type, a, b):
    a_t, b_t = isinstance(a, Tensor), isinstance(b, Tensor)
    if a_t and not b_t:
        b = convert_to_tensor(b, dtype=a.dtype)
    elif b_t and not a_t:
        a = convert_to_tensor(a, dtype=b.dtype)
    return _apply(op_type, [a, b])


def _apply(op_type, inputs, attrs=None, name=None):
    """Adds an op of `op_type` to the default graph; returns its one output
    as a Tensor, a tuple for several, the Operation for none."""
    g = get_default_graph()
    cc_inputs = []
    ctx = g._cf_stack[-1] if g._cf_stack else None
    for x in inputs:
        for e in (x if isinstance(x, (list, tuple)) else [x]):
            t = _checked(g, convert_to_tensor(e))
            if ctx is not None:
                t = ctx.capture(t)  # a tensor from outside the branch or loop, made visible inside
            cc_inputs.append(t._out)
    if g._colocate:
        attrs = dict(attrs or {}, _class=list(g._colocate))
    cc_op = _distflow.add_op(g._scope(name), op_type, cc_inputs, attrs or {})
    g._last_id += 1
    n = cc_op.num_outputs
    if n == 0:
        return Operation(cc_op, g)
    outs = [Tensor(_distflow.Output(cc_op, i, g._root), g) for i in range(n)]
    if ctx is not None:
        for t in outs:
            g._tensor_ctx[t.name] = ctx
    return outs[0] if n == 1 else tuple(outs)


def _checked(g, t):
    if t._out.graph_key != g.graph_key:
        raise ValueError(f"Tensor '{t.name}' must be from the same graph as the op being added")
    return t


def _shape_list(shape):
    """A shape as TF1 accepts one (None, an int, a list or tuple of ints and
    Nones, a TensorShape) as a list, or None for an unknown rank."""
    if shape is None:
        return None
    if isinstance(shape, TensorShape):
        return None if shape._dims is None else list(shape._dims)
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [None if d is None else int(d) for d in shape]


def placeholder(dtype, shape=None, name=None):
    dt = _dtypes.as_dtype(dtype)
    # An unknown shape (None) accepts any feed; [None, 784] any batch size.
    attrs = {"dtype": dt._distflow_dtype, "shape": _shape_list(shape)}
    return _apply("Placeholder", [], attrs, name=name)


def placeholder_with_default(input, shape, name=None):  # noqa: A002 (TensorFlow's name)
    """A placeholder that yields `input` when it is not fed."""
    value = convert_to_tensor(input)
    return _apply("PlaceholderWithDefault", [value], {"shape": _shape_list(shape)}, name=name)


class Variable(Tensor):
    """A variable (tf.Variable): its initial value runs in `initializer`,
    which global_variables_initializer() groups with every other."""

    def __init__(self, initial_value=None, trainable=True, collections=None, validate_shape=True,
                 caching_device=None, name=None, variable_def=None, dtype=None, expected_shape=None,
                 import_scope=None, constraint=None, use_resource=None, synchronization=None, aggregation=None):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if variable_def is not None:
            raise NotImplementedError("tf.Variable(variable_def=...)")
        g = get_default_graph()
        with g._outside_control_flow():  # a variable made in a loop body or branch is the graph's
            if callable(initial_value):
                init, var_name = self._initial_value_on_its_device(g, initial_value, name or "Variable", dtype)
                saved, g._name_stack = g._name_stack, []
                try:
                    scope = g._scope(var_name, exact=True)
                finally:
                    g._name_stack = saved
            else:
                init = convert_to_tensor(initial_value, dtype=dtype)
                scope = g._scope(name or "Variable")
            cc_var = _distflow.make_variable(scope, init._out, bool(trainable))
        self._finish(cc_var, g, init, trainable, collections, constraint)

    @staticmethod
    def _initial_value_on_its_device(g, make_initial, name, dtype):
        """Calls tf.Variable's initial_value function as TensorFlow does:
        under the name scope "<variable>/Initializer", with no device and
        colocated with the variable (its ops carry "_class": "loc:@<variable>",
        which the placer follows), so a random table of a variable on a ps is
        drawn on the ps, not in the caller's device scope and shipped. The
        variable's name is reserved first; returns (initial value, that name)."""
        prefix = "/".join(g._name_stack)
        var_name = g._unique_name(f"{prefix}/{name}" if prefix else name)
        saved = (g._name_stack, g._device_stack, g._colocate)
        try:
            g._name_stack = var_name.split("/") + ["Initializer"]
            g._device_stack = g._device_stack + [None]
            g._colocate = ["loc:@" + var_name]
            init = convert_to_tensor(make_initial(), dtype=dtype)
        finally:
            g._name_stack, g._device_stack, g._colocate = saved
        return init, var_name

    @classmethod
    def _with_colocated_initializer(cls, name, shape, dtype, make_initial, trainable=True, collections=None,
                                    constraint=None):
        """A variable whose initial value, make_initial(), is computed where
        the variable lives (TF colocates an initializer function's ops with
        its variable): on a ps, a random table is drawn on the ps rather than
        on the worker and shipped. `name` is the full name; the variable op
        is made first, so the device scopes and functions place it as usual,
        then its initializer ops on its device."""
        g = get_default_graph()
        self = cls.__new__(cls)
        saved_id = g._last_id  # neither op counts towards random ops' op seeds, as with make_variable
        saved = (g._name_stack, g._device_stack, g._control_stack)
        with g._outside_control_flow():
            try:
                g._name_stack = []
                var = _apply("Variable", [], {"shape": list(shape), "dtype": dtype._distflow_dtype}, name=name)
                g._last_id = saved_id
                device = var.op.device
                g._device_stack, g._control_stack = [None] + ([device] if device else []), []
                g._name_stack = name.split("/") + ["Initializer"]
                init = make_initial()
                g._name_stack = []
                assign = _apply("Assign", [var, init], name=name + "/Assign")
                g._last_id -= 1
            finally:
                g._name_stack, g._device_stack, g._control_stack = saved
        _distflow.add_initializer(g._root, assign.op._op)
        if trainable:
            _distflow.add_trainable_variable(g._root, var._out)
        self._finish(var._out, g, init, trainable, collections, constraint)
        return self

    def _finish(self, cc_var, g, init, trainable, collections, constraint):
        super().__init__(cc_var, g)
        self.initial_value = init
        self.trainable = bool(trainable)
        self.constraint = constraint
        collections = [GraphKeys.GLOBAL_VARIABLES] if collections is None else list(collections)
        if self.trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        g.add_to_collections(collections, self)
        if GraphKeys.LOCAL_VARIABLES in collections:
            g._local_variable_ops.add(self.op.name)

    def initialized_value(self):
        return self.initial_value

    def load(self, value, session=None):
        """Sets the variable to `value` (a numpy value) in `session`."""
        session = session or get_default_session()
        if not hasattr(self, "_load_feed"):
            with self.graph.as_default(), control_dependencies(None):
                self._load_feed = placeholder(self.dtype, self.shape._dims, name=self.op.name + "/load_value")
                self._load_op = self.assign(self._load_feed)
        session.run(self._load_op, feed_dict={self._load_feed: value})

    def __repr__(self):
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    def assign(self, value, name=None):
        return _binary_ref("Assign", self, value, name)

    def assign_add(self, value, name=None):
        return _binary_ref("AssignAdd", self, value, name)

    def assign_sub(self, value, name=None):
        return _binary_ref("AssignSub", self, value, name)

    @property
    def initializer(self):
        for op in self.graph._root.initializers():
            if op.name.startswith(self.op.name + "/"):
                return Operation(op, self.graph)
        raise ValueError(f"Variable '{self.name}' has no initializer")

    def value(self):
        return _apply("Identity", [self])

    def read_value(self):
        return self.value()


def _binary_ref(op_type, ref, value, name):
    return _apply(op_type, [ref, convert_to_tensor(value, dtype=ref.dtype)], name=name)


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None, op_dict=None,
                     producer_op_list=None):
    """Adds the nodes of `graph_def` (Graph.as_graph_def's GraphDef, or its
    serialized bytes) to the default graph under the name scope `name`
    ("import" by default, none if ""), as tf.import_graph_def does; returns
    the operations and tensors named in `return_elements`, from the
    imported graph. Variables come back as nodes: use
    tf.train.import_meta_graph to get them back as variables."""
    del op_dict, producer_op_list
    if input_map:
        raise NotImplementedError("tf.import_graph_def: input_map is not supported yet; import the graph, then "
                                  "feed the imported placeholders by name")
    if isinstance(graph_def, (bytes, bytearray)):
        data = bytes(graph_def)
    elif hasattr(graph_def, "SerializeToString"):
        data = graph_def.SerializeToString()
    else:
        raise TypeError(f"tf.import_graph_def: graph_def must be a GraphDef (Graph.as_graph_def()) or its bytes, "
                        f"not {type(graph_def).__name__}")
    graph = get_default_graph()
    if graph.finalized:
        raise RuntimeError("tf.import_graph_def: the graph is finalized and cannot be modified")
    scope = "import" if name is None else name
    prefix = f"{scope}/" if scope else ""
    _distflow.import_graph_def(graph._root, data, prefix, False)
    if return_elements is None:
        return None
    return [graph.as_graph_element(prefix + e) for e in return_elements]


# ---- get_variable and initializers --------------------------------------------


def constant_initializer(value=0):
    def init(shape, dtype):
        # A scalar value over a large shape is a Fill computed where the
        # variable lives, as zeros_initializer is in TensorFlow: a constant
        # of the whole shape would be built here and carried in the graph
        # (94 MB for a 30,522 x 768 float embedding table).
        if not isinstance(value, Tensor) and np.ndim(value) == 0 and shape is not None:
            from distflow import array_ops
            return array_ops._filled(value, shape, dtype, "Const")
        return constant(value, dtype=dtype, shape=shape)

    return init


def zeros_initializer():
    return constant_initializer(0)


def ones_initializer():
    return constant_initializer(1)


_DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


def get_seed(op_seed):
    """TF1's (graph seed, op seed) for a random op (random_seed.get_seed):
    with a graph seed, an op without its own seed takes the number of ops
    in the graph so far, so a program draws the same values on every run;
    an op seed alone pairs with a fixed default graph seed; neither gives
    (None, None), fresh randomness."""
    graph_seed = get_default_graph().seed
    if graph_seed is not None:
        if op_seed is None:
            op_seed = get_default_graph()._last_id
        seeds = graph_seed % (_MAXINT32 + 1), int(op_seed) % (_MAXINT32 + 1)
    elif op_seed is not None:
        seeds = _DEFAULT_GRAPH_SEED, int(op_seed) % (_MAXINT32 + 1)
    else:
        return None, None
    # (0, 0) means "nondeterministic" to the kernels.
    return (0, _MAXINT32) if seeds == (0, 0) else seeds


def _random_initializer(op_type, scale, mean=0.0, seed=None):
    def init(shape, dtype):
        attrs = {"dtype": dtype._distflow_dtype}
        graph_seed, op_seed = get_seed(seed)
        if graph_seed is not None:
            attrs["seed"], attrs["seed2"] = graph_seed, op_seed
        r = _apply(op_type, [constant(list(shape), dtype=_dtypes.int32)], attrs)
        return r * constant(scale, dtype=dtype) + constant(mean, dtype=dtype)
    return init


def random_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype=None):
    return _random_initializer("RandomStandardNormal", stddev, mean, seed)


def truncated_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype=None):
    return _random_initializer("TruncatedNormal", stddev, mean, seed)


def random_uniform_initializer(minval=0.0, maxval=1.0, seed=None, dtype=None):
    return _random_initializer("RandomUniform", maxval - minval, minval, seed)


AUTO_REUSE = "auto_reuse"  # tf.AUTO_REUSE: get_variable makes a variable or returns the existing one


class VariableScope:
    """What variable_scope yields and get_variable_scope returns (tf.VariableScope)."""

    def __init__(self, name, reuse=None, initializer=None, regularizer=None, dtype=None, name_scope="",
                 partitioner=None):
        self.name = name
        self.partitioner = partitioner
        self._reuse = reuse
        self.initializer = initializer
        self.regularizer = regularizer
        self.dtype = dtype
        self.original_name_scope = name_scope

    @property
    def reuse(self):
        return self._reuse

    def reuse_variables(self):
        self._reuse = True

    def set_initializer(self, initializer):
        self.initializer = initializer

    def set_regularizer(self, regularizer):
        self.regularizer = regularizer

    def set_partitioner(self, partitioner):
        self.partitioner = partitioner


def get_variable_scope():
    g = get_default_graph()
    if g._var_scope:
        return g._var_scope[-1]
    if not hasattr(g, "_root_var_scope"):
        g._root_var_scope = VariableScope("")
    return g._root_var_scope


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None, regularizer=None,
                   caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                   use_resource=None, constraint=None, auxiliary_name_scope=True):
    """tf.variable_scope: names variables "<scope>/<name>" for get_variable
    and opens a name scope of the same name for ops. A scope named by
    default_name only is made unique ("dense", "dense_1", ...). reuse=True
    (or AUTO_REUSE) lets get_variable return existing variables; inner
    scopes inherit reuse, initializer, regularizer and partitioner (which
    get_variable then applies to every variable of rank 1 or more made
    in the scope, as TF does)."""
    if custom_getter is not None:
        raise NotImplementedError("variable_scope(custom_getter=...)")
    g = get_default_graph()
    parent = get_variable_scope()
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        # Re-entering a scope object: its own variable names, a fresh op scope.
        relative = full.rsplit("/", 1)[-1]
        inherit = name_or_scope
    else:
        if name_or_scope is None and default_name is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is None:
            counts = g.__dict__.setdefault("_default_scope_counts", {})
            key = (parent.name, default_name)
            n = counts.get(key, 0)
            counts[key] = n + 1
            relative = default_name if n == 0 else f"{default_name}_{n}"
        else:
            relative = name_or_scope
        full = f"{parent.name}/{relative}" if parent.name else relative
        inherit = parent
    if name_or_scope is not None:
        # As TF: entering a named scope restarts the numbering of the
        # default-named scopes inside it, so a second `with
        # variable_scope('net', reuse=True)` names its layers as the first did.
        counts = g.__dict__.setdefault("_default_scope_counts", {})
        for key in [k for k in counts if k[0] == full or k[0].startswith(full + "/")]:
            del counts[key]
    if reuse is False:
        reuse = None  # as TF: False does not turn an inherited reuse off
    scope = VariableScope(full,
                          reuse=reuse if reuse is not None else (parent.reuse or inherit.reuse),
                          initializer=initializer if initializer is not None else inherit.initializer,
                          regularizer=regularizer if regularizer is not None else inherit.regularizer,
                          dtype=dtype if dtype is not None else inherit.dtype,
                          partitioner=partitioner if partitioner is not None else inherit.partitioner)
    g._var_scope.append(scope)
    saved_names = g._name_stack
    if isinstance(name_or_scope, VariableScope):
        g._name_stack = [n for n in full.split("/") if n]
    else:
        g._name_stack = list(g._name_stack) + [relative]
    scope.original_name_scope = "/".join(g._name_stack) + "/"
    try:
        yield scope
    finally:
        g._name_stack = saved_names
        g._var_scope.pop()


def types_namespace(**kw):
    import types
    return types.SimpleNamespace(**kw)


class _VariableReplay:
    """The variables a while_loop body made on its first call, handed out in
    the same order while the body is built again for the loop's gradient (so
    a body calling get_variable without reuse, or making a tf.layers layer
    whose name is made unique again, gets the same variables)."""

    def __init__(self, made):
        self._made = list(made)
        self._next = 0

    def take(self, g, full, shape, reuse):
        if self._next >= len(self._made):
            return None
        name, v = self._made[self._next]
        if name != full and reuse and full in g._variables:
            return None  # an existing variable shared: not one the body made
        if shape is not None and v.shape._dims is not None and list(shape) != list(v.shape._dims):
            raise ValueError(f"get_variable('{full}'): the while_loop body, built again for its gradient, asks "
                             f"for shape {list(shape)} where its first build made '{name}' of shape "
                             f"{v.shape._dims}; the body must make the same variables each time it is called")
        self._next += 1
        return v


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                 collections=None, caching_device=None, partitioner=None, validate_shape=True, use_resource=None,
                 custom_getter=None, constraint=None, synchronization=None, aggregation=None):
    """tf.get_variable: a new variable `name` in the current variable scope,
    or, in a scope opened with reuse=True (or AUTO_REUSE), the existing one."""
    g = get_default_graph()
    vs = get_variable_scope()
    full = f"{vs.name}/{name}" if vs.name else name
    outermost = g._var_depth == 0
    if outermost and g._var_replay:
        v = g._var_replay[-1].take(g, full, shape, vs.reuse)
        if v is not None:
            for log in g._var_logs:
                log.append((full, v))
            return v
    existed = full in g._variables
    g._var_depth += 1
    try:
        v = _get_variable(name, shape, dtype, initializer, regularizer, trainable, collections, partitioner,
                          constraint)
    finally:
        g._var_depth -= 1
    if outermost and not existed:
        for log in g._var_logs:
            log.append((full, v))
    return v


def _get_variable(name, shape, dtype, initializer, regularizer, trainable, collections, partitioner, constraint):
    g = get_default_graph()
    vs = get_variable_scope()
    full = f"{vs.name}/{name}" if vs.name else name
    if partitioner is None and vs.partitioner is not None and shape is not None and len(list(shape)) > 0:
        partitioner = vs.partitioner  # the scope's, for variables of rank >= 1 (as TF)
    if partitioner is False:  # a part of a partitioned variable: never partitioned again
        partitioner = None
    elif partitioner is not None:  # parts "<name>/part_i" (partitioned_variables.py)
        if full in g._variables:
            return get_variable(name, shape=shape, dtype=dtype, partitioner=False)
        from distflow import partitioned_variables as _pv
        pv = _pv.create(get_variable, full, name, shape, dtype, initializer, partitioner, regularizer=regularizer,
                        trainable=trainable, collections=collections, constraint=constraint)
        g._variables[full] = pv
        return pv
    reuse = vs.reuse
    if full in g._variables:
        if not reuse:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
                             f"reuse=tf.AUTO_REUSE in VarScope?")
        v = g._variables[full]
        if shape is not None and v.shape._dims is not None and list(shape) != v.shape._dims:
            raise ValueError(f"Trying to share variable {full}, but specified shape {list(shape)} and found "
                             f"shape {v.shape._dims}.")
        return v
    if reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with tf.get_variable(). Did you "
                         f"mean to set reuse=tf.AUTO_REUSE in VarScope?")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else (vs.dtype and _dtypes.as_dtype(vs.dtype)) or \
        _dtypes.float32
    if initializer is None:
        initializer = vs.initializer
    if initializer is None:
        if shape is None:
            raise ValueError(f"get_variable('{full}') needs a shape or an initializer")
        initializer = glorot_uniform_initializer() if dt in (_dtypes.float32, _dtypes.float64) \
            else zeros_initializer()
    if isinstance(initializer, type):
        initializer = initializer()
    trainable = True if trainable is None else trainable
    if callable(initializer) and not isinstance(initializer, Tensor):
        shape = _shape_list(shape)
        if shape is None or None in shape:
            raise ValueError(f"get_variable('{full}') with an initializer function needs a fully defined shape, "
                             f"got {shape}")
        # Its ops run where the variable lives (on its ps), as TF colocates them.
        v = Variable._with_colocated_initializer(full, shape, dt, lambda: initializer(list(shape), dt),
                                                 trainable=trainable, collections=collections,
                                                 constraint=constraint)
    else:
        with g._outside_control_flow():
            init = convert_to_tensor(initializer, dtype=dt)
        saved, g._name_stack = g._name_stack, []
        try:
            v = Variable(init, trainable=trainable, name=full, collections=collections, constraint=constraint)
        finally:
            g._name_stack = saved
    g._variables[full] = v
    if regularizer is None:
        regularizer = vs.regularizer
    if regularizer is not None:
        with name_scope(full + "/Regularizer"):
            loss = regularizer(v)
        if loss is not None:
            g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v


def glorot_uniform_initializer(seed=None, dtype=None):
    def init(shape, dtype):
        fan_in = shape[-2] if len(shape) >= 2 else (shape[0] if shape else 1)
        fan_out = shape[-1] if shape else 1
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        limit = float(np.sqrt(6.0 / (fan_in * receptive + fan_out * receptive)))
        return _random_initializer("RandomUniform", 2 * limit, -limit, seed)(shape, dtype)
    return init


def _initializers(g, local):
    """The initialisers (Assigns) of the graph's variables, those of the
    LOCAL_VARIABLES or of all the others."""
    out = []
    for op in g._root.initializers():
        var_op = op.name.rsplit("/", 1)[0]
        if (var_op in g._local_variable_ops) == local:
            out.append(Operation(op, g))
    return out


def global_variables_initializer():
    """Initialises every variable of the graph but the local ones: those
    made in Python and those optimizers made in C++ (their slots)."""
    g = get_default_graph()
    if not g._local_variable_ops:
        return Operation(_distflow.global_variables_initializer(g._scope("init")), g)
    return group(*_initializers(g, local=False), name="init")


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
    g = get_default_graph()
    return group(*_initializers(g, local=True), name="local_init")


initialize_local_variables = local_variables_initializer


def variables_initializer(var_list, name="init"):
    var_list = list(var_list)
    if not var_list:
        return group(name=name)
    return group(*[v.initializer for v in var_list], name=name)


def trainable_variables(scope=None):
    g = get_default_graph()
    if scope is None:
        return [_as_variable(g, o) for o in g._root.trainable_variables()]
    return g.get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def _as_variable(g, cc_output):
    """The Python Variable of a C++ variable output, where Python made it."""
    for v in g._collections.get(GraphKeys.GLOBAL_VARIABLES, []) + g._collections.get(GraphKeys.LOCAL_VARIABLES, []):
        if isinstance(v, Variable) and v.name == cc_output.name:
            return v
    return Tensor(cc_output, g)


def global_variables(scope=None):
    return get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def local_variables(scope=None):
    return get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope=None):
    return get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def is_variable_initialized(variable):
    return _apply("IsVariableInitialized", [variable])


def tables_initializer(name="init_all_tables"):
    return group(*get_collection(GraphKeys.TABLE_INITIALIZERS), name=name)


def group(*inputs, name=None):
    with control_dependencies(list(inputs)):
        return _apply("NoOp", [], name=name)


# ---- sessions ----------------------------------------------------------------


class GPUOptions:
    """tf.GPUOptions, accepted and ignored: distflow runs on CPUs only, so a
    TF1 program's GPU settings (allow_growth, per_process_gpu_memory_fraction,
    visible_device_list, ...) change nothing. An unknown field is an error,
    as TF's protocol message makes it."""

    _FIELDS = {"per_process_gpu_memory_fraction": 0.0, "allow_growth": False, "allocator_type": "",
               "deferred_deletion_bytes": 0, "visible_device_list": "", "polling_active_delay_usecs": 0,
               "polling_inactive_delay_msecs": 0, "force_gpu_compatible": False, "experimental": None}

    def __init__(self, **fields):
        for name in fields:
            if name not in self._FIELDS:
                raise ValueError(f'Protocol message GPUOptions has no "{name}" field.')
        for name, default in self._FIELDS.items():
            setattr(self, name, fields.get(name, default))

    def __repr__(self):
        set_fields = {k: getattr(self, k) for k, d in self._FIELDS.items() if getattr(self, k) != d}
        return f"GPUOptions({set_fields})"


class ConfigProto:
    """Session options with TensorFlow's names. gpu_options (tf.GPUOptions)
    and device_count={"GPU": n} are accepted and ignored: distflow has no
    GPU devices."""

    def __init__(self, log_device_placement=False, allow_soft_placement=False, device_filters=None,
                 inter_op_parallelism_threads=0, intra_op_parallelism_threads=0, device_count=None,
                 operation_timeout_in_ms=0, gpu_options=None, graph_options=None, use_per_session_threads=False,
                 isolate_session_state=False):
        if gpu_options is not None and not isinstance(gpu_options, GPUOptions):
            raise TypeError(f"ConfigProto(gpu_options=...) takes a tf.GPUOptions, not {type(gpu_options).__name__}")
        self.gpu_options = gpu_options if gpu_options is not None else GPUOptions()
        self.graph_options = graph_options
        self.use_per_session_threads = use_per_session_threads
        self.isolate_session_state = isolate_session_state
        self.log_device_placement = log_device_placement
        self.allow_soft_placement = allow_soft_placement
        self.device_filters = list(device_filters or [])
        self.inter_op_parallelism_threads = inter_op_parallelism_threads
        self.intra_op_parallelism_threads = intra_op_parallelism_threads
        self.device_count = dict(device_count or {})
        self.operation_timeout_in_ms = operation_timeout_in_ms

    def _options(self):
        return {
            "log_device_placement": bool(self.log_device_placement),
            "allow_soft_placement": bool(self.allow_soft_placement),
            "device_filters": list(self.device_filters),
            "inter_op_threads": int(self.inter_op_parallelism_threads),
            "intra_op_threads": int(self.intra_op_parallelism_threads),
            "operation_timeout_ms": int(self.operation_timeout_in_ms),
        }


_default_session = threading.local()


def get_default_session():
    s = getattr(_default_session, "stack", None)
    if not s:
        raise ValueError("No default session: run inside `with tf.Session() as sess:` or pass session=")
    return s[-1]


# Where a session with target "" runs: in process, unless the process is a
# task of a cluster that says otherwise (distflow.horovod's init() starts
# this task's server and sets (target, task name) here).
_default_session_task = None


def _session_target(target, options):
    """The target and options a session made with `target` uses: "" means
    the process's own task once one is set (its devices only, unless the
    options filter devices themselves)."""
    if target or _default_session_task is None:
        return target, options
    own_target, task = _default_session_task
    if not options.get("device_filters"):
        options = dict(options, device_filters=[task])
    return own_target, options


class Session:
    """tf.Session(target="", graph=None, config=None): runs `graph` (the
    default one) in process or on the cluster behind target "grpc://...".
    run() takes fetches of any nesting and numpy feeds."""

    def __init__(self, target="", graph=None, config=None):
        self.graph = graph or get_default_graph()
        self._config = config or ConfigProto()
        target, options = _session_target(target, self._config._options())
        self._sess = _distflow.Session(target, options)

    def __enter__(self):
        if not hasattr(_default_session, "stack"):
            _default_session.stack = []
        _default_session.stack.append(self)
        self._graph_ctx = self.graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._graph_ctx.__exit__(*exc)
        _default_session.stack.pop()
        self.close()

    def close(self):
        self._sess.close()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        flat = []
        structure = self._flatten(fetches, flat)
        outputs, targets, slots = [], [], []
        for f in flat:
            if isinstance(f, str):
                f = self.graph.as_graph_element(f)  # "name:0" a tensor, "name" an operation
            if isinstance(f, Operation):
                self._check_graph(f._op.graph_key, f.name)
                targets.append(f._op)
                slots.append(None)
            else:
                t = self._as_fetch(f)
                slots.append(len(outputs))
                outputs.append(t._out)
        feeds = []
        for key, value in (feed_dict or {}).items():
            t = self._as_fetch(key)
            feeds.append((t._out, self._feed_value(t, value)))
        timeout = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        if run_metadata is not None and getattr(options, "trace_level", 0):
            # A traced step: its timeline goes to run_metadata.step_stats.
            values, trace = self._run_raw(feeds, outputs, targets, timeout, trace=True)
            run_metadata.step_stats = trace
        else:
            values = self._run_raw(feeds, outputs, targets, timeout)
        results = [None if s is None else self._scalar(values[s]) for s in slots]
        return self._unflatten(structure, iter(results))

    def _run_raw(self, feeds, outputs, targets, timeout, trace=False):
        if trace:
            return self._sess.run(feeds, outputs, targets, timeout, True)
        return self._sess.run(feeds, outputs, targets, timeout)

    def _as_fetch(self, f):
        if isinstance(f, str):
            f = self.graph.as_graph_element(f, allow_operation=False)
        if not isinstance(f, Tensor):
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f).__name__}; must be a Tensor, "
                            f"an Operation, or a list, tuple or dict of them")
        self._check_graph(f._out.graph_key, f.name)
        return f

    def _check_graph(self, key, name):
        if key != self.graph.graph_key:
            raise ValueError(f"Tensor or Operation '{name}' is not an element of this session's graph.")

    @staticmethod
    def _feed_value(t, value):
        dt = t.dtype
        if isinstance(value, Tensor):
            raise TypeError(f"The value of a feed cannot be a tf.Tensor ('{value.name}'); feed numpy "
                            f"arrays, lists or scalars")
        arr = np.asarray(value, dtype=object if dt == _dtypes.string else None)
        if dt != _dtypes.string:
            if arr.dtype.kind in ("U", "S", "O"):
                raise TypeError(f"Cannot feed {arr.dtype} values to '{t.name}' of dtype {dt.name}")
            arr = arr.astype(dt.as_numpy_dtype, copy=False)
        shape = t._out.shape
        if shape is not None:
            ok = len(shape) == arr.ndim and all(d is None or d == n for d, n in zip(shape, arr.shape))
            if not ok:
                want = "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"
                raise ValueError(f"Cannot feed value of shape {arr.shape} for Tensor '{t.name}', "
                                 f"which has shape {want}")
        return arr

    @staticmethod
    def _scalar(arr):
        if isinstance(arr, np.ndarray) and arr.ndim == 0:
            return arr[()]  # numpy scalar, as TensorFlow returns
        return arr

    def _flatten(self, fetches, flat):
        if isinstance(fetches, (list, tuple)):
            return (type(fetches), [self._flatten(f, flat) for f in fetches])
        if isinstance(fetches, dict):
            return (dict, [(k, self._flatten(v, flat)) for k, v in fetches.items()])
        flat.append(fetches)
        return None

    def _unflatten(self, structure, it):
        if structure is None:
            return next(it)
        kind, items = structure
        if kind is dict:
            return {k: self._unflatten(s, it) for k, s in items}
        values = [self._unflatten(s, it) for s in items]
        if kind is list:
            return values
        if hasattr(kind, "_fields"):  # namedtuple
            return kind(*values)
        return kind(values)


class InteractiveSession(Session):
    """tf.InteractiveSession: a Session that makes itself the default one
    when made (so Tensor.eval() and Operation.run() need no session=),
    until closed."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        if not hasattr(_default_session, "stack"):
            _default_session.stack = []
        _default_session.stack.append(self)
        self._default_graph_ctx = self.graph.as_default()
        self._default_graph_ctx.__enter__()
        self._is_default = True

    def close(self):
        if getattr(self, "_is_default", False):
            self._is_default = False
            if _default_session.stack and _default_session.stack[-1] is self:
                _default_session.stack.pop()
            try:
                self._default_graph_ctx.__exit__(None, None, None)
            except IndexError:
                pass
        super().close()


class RunOptions:
    """tf.RunOptions: trace_level (NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE,
    FULL_TRACE) and timeout_in_ms."""
    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    def __init__(self, trace_level=0, timeout_in_ms=0, inter_op_thread_pool=0, output_partition_graphs=False,
                 report_tensor_allocations_upon_oom=False):
        self.trace_level = trace_level
        self.timeout_in_ms = timeout_in_ms
        self.output_partition_graphs = output_partition_graphs


class RunMetadata:
    """tf.RunMetadata: what a traced step reports. A step run with
    options=RunOptions(trace_level=...) and run_metadata= fills step_stats
    with the step's timeline as Chrome trace-event JSON (bytes; every task's
    part of the step); SerializeToString() returns it for
    FileWriter.add_run_metadata."""

    def __init__(self):
        self.step_stats = b""
        self.partition_graphs = []

    def SerializeToString(self):  # noqa: N802 (protobuf's name)
        return bytes(self.step_stats)

    def ParseFromString(self, data):  # noqa: N802
        self.step_stats = bytes(data)
