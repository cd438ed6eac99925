"""tf.TensorArray over the C++ TensorArray resource, as TensorFlow builds it:
a handle to an array of the step (kernels/cpu/tensor_array.h) and a float
scalar `flow` that orders the ops on it. write, scatter, unstack and split
store elements in the array and return a new TensorArray object with the
same handle and a new flow (`ta = ta.write(t, x)`, the array a while_loop
variable through its flow); a write stores the element only, so a loop of N
writes costs O(N). Gradients come from the ops' gradients (a gradient array
per tf.gradients call, client/grad/tensor_array_grad.cc).

As in TensorFlow, an index takes one write: a second write fails the step
with an error naming the array and the index. Reading an element never
written gives zeros when its shape is known (the array's element_shape, or
the shape its written elements share: TF's inferred element shape), else an
error naming the array and the index. A TensorArray may go into and come out
of tf.cond branches and while_loop bodies. clear_after_read is not enforced
(an element may be read twice; TF: an error unless clear_after_read=False).
close() frees nothing early: an array lives until its step ends.
"""
from distflow import array_ops as _array
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import math_ops as _math


def _index(i):
    return _fw.convert_to_tensor(i, dtype=_dtypes.int32)


class TensorArray:
    """tf.TensorArray (TF1's arguments; clear_after_read and
    colocate_with_first_write_call are accepted and have no effect)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        self._dtype = _dtypes.as_dtype(dtype)
        self._dynamic = bool(dynamic_size)
        self._size = size
        self._element_shape = _fw._shape_list(element_shape)
        self._infer_shape = infer_shape
        if handle is not None:
            self._handle = _fw.convert_to_tensor(handle)
            self._flow = _fw.convert_to_tensor(flow) if flow is not None else _fw.constant(0.0)
            return
        if flow is not None:
            raise ValueError("tf.TensorArray: flow was given without handle; give both, or neither to make an array")
        if size is None and not self._dynamic:
            raise ValueError("tf.TensorArray: size must be given unless dynamic_size=True")
        attrs = {"dtype": self._dtype._distflow_dtype, "dynamic_size": self._dynamic,
                 "clear_after_read": True if clear_after_read is None else bool(clear_after_read),
                 "tensor_array_name": tensor_array_name or "", "element_shape": self._element_shape}
        with _fw.name_scope(name or tensor_array_name or "TensorArray"):
            self._handle, self._flow = _fw._apply("TensorArrayV3", [_index(0 if size is None else size)], attrs)

    # ---- what a TensorArray is made of ----
    def _with_flow(self, flow, element_dims=None):
        ta = TensorArray.__new__(TensorArray)
        ta.__dict__.update(self.__dict__)
        ta._flow = flow
        if element_dims is not None and self._infer_shape:
            ta._element_shape = self._merged(element_dims)
        return ta

    def _merged(self, dims):
        es = self._element_shape
        if es is None or len(es) != len(dims):
            return list(dims)
        return [a if a is not None else b for a, b in zip(es, dims)]

    @property
    def flow(self):
        return self._flow

    @property
    def handle(self):
        return self._handle

    @property
    def dtype(self):
        return self._dtype

    @property
    def element_shape(self):
        return _fw.TensorShape(self._element_shape)

    @property
    def dynamic_size(self):
        return self._dynamic

    # ---- reading ----
    def read(self, index, name=None):
        return _fw._apply("TensorArrayReadV3", [self._handle, _index(index), self._flow],
                          {"dtype": self._dtype._distflow_dtype, "element_shape": self._element_shape},
                          name=name or "TensorArrayRead")

    def gather(self, indices, element_shape=None, name=None):
        es = self._element_shape if element_shape is None else _fw._shape_list(element_shape)
        return _fw._apply("TensorArrayGatherV3",
                          [self._handle, _fw.convert_to_tensor(indices, dtype=_dtypes.int32), self._flow],
                          {"dtype": self._dtype._distflow_dtype, "element_shape": es},
                          name=name or "TensorArrayGather")

    def stack(self, name=None):
        with _fw.name_scope(name or "TensorArrayStack"):
            out = self.gather(_array.range(0, self.size()))
            if not self._dynamic and isinstance(self._size, int) and self._element_shape is not None:
                out.set_shape([self._size] + self._element_shape)
            return out

    def concat(self, name=None):
        es = self._element_shape
        value, _ = _fw._apply("TensorArrayConcatV3", [self._handle, self._flow],
                              {"dtype": self._dtype._distflow_dtype,
                               "element_shape_except0": es[1:] if es else None},
                              name=name or "TensorArrayConcat")
        return value

    def size(self, name=None):
        return _fw._apply("TensorArraySizeV3", [self._handle, self._flow], name=name or "TensorArraySize")

    # ---- writing: each returns the array with its new flow ----
    def write(self, index, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        self._check_element(value)
        flow = _fw._apply("TensorArrayWriteV3", [self._handle, _index(index), value, self._flow],
                          name=name or "TensorArrayWrite")
        return self._with_flow(flow, value.shape._dims)

    def unstack(self, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        dims = value.shape._dims
        if dims is not None and len(dims) == 0:
            raise ValueError(f"TensorArray.unstack: '{value.name}' is a scalar; it needs a first dimension")
        if dims is not None:
            self._check_element_dims(dims[1:], value)
            if not self._dynamic and isinstance(self._size, int) and dims[0] is not None and dims[0] != self._size:
                raise ValueError(f"TensorArray.unstack: the array has size {self._size} but '{value.name}' has "
                                 f"{dims[0]} rows")
        with _fw.name_scope(name or "TensorArrayUnstack"):
            rows = _array.range(0, _array.shape(value)[0])
            return self.scatter(rows, value, name="TensorArrayScatter")

    def scatter(self, indices, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        dims = value.shape._dims
        if dims is not None and len(dims) >= 1:
            self._check_element_dims(dims[1:], value)
        flow = _fw._apply("TensorArrayScatterV3",
                          [self._handle, _fw.convert_to_tensor(indices, dtype=_dtypes.int32), value, self._flow],
                          name=name or "TensorArrayScatter")
        return self._with_flow(flow, dims[1:] if dims is not None and len(dims) >= 1 else None)

    def split(self, value, lengths, name=None):
        """The array of the pieces of `value` along its first dimension, of
        `lengths` rows each (they may differ; then stack fails and concat
        joins them)."""
        import numpy as np
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        static = None if isinstance(lengths, _fw.Tensor) else np.asarray(lengths, dtype=np.int64).ravel()
        lengths = _math.cast(_fw.convert_to_tensor(lengths), _dtypes.int64)
        dims = value.shape._dims
        if dims is not None and len(dims) == 0:
            raise ValueError(f"TensorArray.split: '{value.name}' is a scalar; it needs a first dimension to split")
        if lengths.shape._dims is not None and len(lengths.shape._dims) != 1:
            raise ValueError(f"TensorArray.split: lengths '{lengths.name}' must be a vector, not of shape "
                             f"{lengths.shape}")
        n = lengths.shape._dims[0] if lengths.shape._dims is not None else None
        if not self._dynamic and isinstance(self._size, int) and n is not None and n != self._size:
            raise ValueError(f"TensorArray.split: the array has size {self._size} but lengths has {n} entries")
        if static is not None and dims is not None and dims[0] is not None and int(static.sum()) != dims[0]:
            raise ValueError(f"TensorArray.split: lengths {list(static)} sum to {int(static.sum())} but "
                             f"'{value.name}' has {dims[0]} rows")
        es = None
        if dims is not None:
            piece = int(static[0]) if static is not None and static.size > 0 and len(set(static)) == 1 else None
            es = [piece] + list(dims[1:])
            self._check_element_dims(es, value)
        flow = _fw._apply("TensorArraySplitV3", [self._handle, value, lengths, self._flow],
                          name=name or "TensorArraySplit")
        return self._with_flow(flow, es)

    def identity(self):
        return self._with_flow(_array.identity(self._flow))

    def close(self, name=None):
        return _fw._apply("TensorArrayCloseV3", [self._handle], name=name or "TensorArrayClose")

    def grad(self, source, flow=None, name=None):
        """The gradient array of this one for gradient computation `source`
        (TF: the name scope of its tf.gradients call, e.g. "gradients")."""
        handle, gflow = _fw._apply("TensorArrayGradV3", [self._handle, self._flow if flow is None else flow],
                                   {"source": source}, name=name or "TensorArrayGrad")
        return TensorArray(self._dtype, size=self._size, dynamic_size=self._dynamic, handle=handle, flow=gflow,
                           infer_shape=self._infer_shape, element_shape=self._element_shape)

    def _check_element(self, value):
        dims = value.shape._dims
        if dims is not None:
            self._check_element_dims(dims, value)

    def _check_element_dims(self, dims, value):
        es = self._element_shape
        if es is None or not self._infer_shape:
            return
        if len(es) != len(dims) or any(a is not None and b is not None and a != b for a, b in zip(es, dims)):
            raise ValueError(f"TensorArray: '{value.name}' has elements of shape {list(dims)} but the array's "
                             f"are {es}")
