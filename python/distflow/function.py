"""Graph functions from Python callables (TensorFlow's Defun): the callable
is traced once into a graph of its own, whose placeholders are the
arguments; the C++ client serializes it as a FunctionDef
(include/distflow/function.h), and a Call node carrying it runs the body
in a sub-executor on the task that runs the node. Gradients flow through
calls (the C++ symbolic gradient of the body). Dataset.map and
Dataset.filter trace their functions here.

A traced function sees only its arguments: a tensor of the outer graph used
inside it is an error (captured tensors are not supported yet); constants
and variables-free computations are fine."""
import itertools

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw

_ids = itertools.count()


class TracedFunction:
    """One tracing of `fn` for the given argument dtypes and shapes.
    `call_args(placeholders)` maps the flat argument placeholders to what
    `fn` is called with; `outputs` are the flat results (Tensors of the body)."""

    def __init__(self, fn, input_types, input_shapes=None, name=None, call_args=None, what="function"):
        self.name = f"{name or getattr(fn, '__name__', 'fn').strip('<>')}_{next(_ids)}"
        input_shapes = input_shapes or [None] * len(input_types)
        self._graph = _fw.Graph()
        with self._graph.as_default():
            self.args = [_fw.placeholder(_dtypes.as_dtype(t), s, name=f"arg{i}")
                         for i, (t, s) in enumerate(zip(input_types, input_shapes))]
            try:
                result = fn(*(call_args(self.args) if call_args else self.args))
            except ValueError as e:
                if "must be from the same graph" in str(e):
                    raise ValueError(f"{what}: the function uses a tensor of the outer graph, which a traced "
                                     f"function cannot capture yet; pass it through the dataset or build it "
                                     f"inside the function ({e})") from None
                raise
            self.structure = result
            self.outputs = self._flat_outputs(result, what)
        self.output_types = [o.dtype for o in self.outputs]
        self.output_shapes = [o.shape for o in self.outputs]
        self.definition = _distflow.make_function_def(self._graph._root, self.name, [a._out for a in self.args],
                                                      [o._out for o in self.outputs])

    @staticmethod
    def _flat_outputs(result, what):
        from distflow.data import structure as _nest
        if result is None:
            raise TypeError(f"{what}: the function returned None; it must return a tensor or a tuple/dict of them")
        flat = _nest.flatten(result)
        out = []
        for i, v in enumerate(flat):
            if isinstance(v, _fw.Operation):
                raise TypeError(f"{what}: result {i} is an Operation ('{v.name}'), not a tensor")
            try:
                t = _fw.convert_to_tensor(v)
            except (TypeError, ValueError) as e:
                raise TypeError(f"{what}: result {i} ({v!r}) is not a tensor or a value convertible to one: {e}") \
                    from None
            # A result that is an argument itself still needs a node of its own.
            out.append(_raw.Identity(input=t))
        if not out:
            raise TypeError(f"{what}: the function returned no tensors")
        return out

    def __call__(self, *args, name=None):
        """Adds a Call of this function to the default graph."""
        if len(args) != len(self.args):
            raise TypeError(f"Function '{self.name}' takes {len(self.args)} arguments, got {len(args)}")
        inputs = [_fw.convert_to_tensor(a, dtype=p.dtype) for a, p in zip(args, self.args)]
        out = _raw.Call(args=inputs, Tin=[p.dtype for p in self.args], Tout=self.output_types, f=self.definition,
                        name=name)
        if isinstance(out, _fw.Operation):
            return out
        return list(out) if isinstance(out, tuple) else [out]


class Defun:
    """@Defun(tf.float32, tf.float32) def f(x, y): ... — traced once when
    defined; calling it adds a Call node. Returns a tensor (one result) or
    a list."""

    def __init__(self, *input_types, **kwargs):
        self._types = input_types
        self._name = kwargs.get("func_name")

    def __call__(self, fn):
        traced = TracedFunction(fn, self._types, name=self._name or fn.__name__, what=f"Defun '{fn.__name__}'")

        def call(*args, **kwargs):
            out = traced(*args, name=kwargs.get("name"))
            return out[0] if len(out) == 1 else out

        call.traced = traced
        call.__name__ = fn.__name__
        return call
