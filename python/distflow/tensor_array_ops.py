"""tf.TensorArray with value semantics: the array is one tensor of shape
[size, *element_shape] (its `flow`), and write, scatter and unstack return
a new TensorArray over a new tensor, as TF1 code uses them
(`ta = ta.write(t, x)`, the array a while_loop variable). Every operation is
ordinary ops (Slice, Concat, Gather, Reshape), so gradients come from theirs
and a loop's gradient rebuilds them like any other body op.

An array whose element shape is unknown until its first write starts as an
empty placeholder and takes its shape then; written inside a while_loop such
an array has no known rank, so that loop gets no gradient (give
element_shape). Reading an element never written gives zeros (TF: an
error). Writes copy the array (a loop writing every step is quadratic in its
length).
"""
from distflow import array_ops as _array
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import math_ops as _math


def _index(i):
    return _fw.convert_to_tensor(i, dtype=_dtypes.int32)


class TensorArray:
    """tf.TensorArray (TF1's arguments; clear_after_read and colocation are
    accepted and have no effect)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        self._dtype = _dtypes.as_dtype(dtype)
        self._dynamic = bool(dynamic_size)
        if size is None and not self._dynamic and flow is None:
            raise ValueError("tf.TensorArray: size must be given unless dynamic_size=True")
        self._size = size
        self._element_shape = _fw._shape_list(element_shape)
        self._infer_shape = infer_shape
        self._empty = False  # True: the placeholder of an array whose elements are unknown yet
        # While a while_loop body is built: what the body did with the array it
        # got as a loop variable (shared by the arrays made from it).
        self._lineage = None
        if flow is not None:
            self._buffer = _fw.convert_to_tensor(flow)
            return
        with _fw.name_scope(name or tensor_array_name or "TensorArray"):
            es = self._element_shape
            if es is not None and all(d is not None for d in es):
                rows = 0 if size is None else size
                if isinstance(rows, _fw.Tensor):
                    shape = _array.concat([_array.reshape(_index(rows), [1]), _fw.constant(es, dtype=_dtypes.int32)], 0)
                    self._buffer = _array.fill(shape, _fw.constant(0, dtype=self._dtype))
                else:
                    self._buffer = _array.zeros([int(rows)] + es, dtype=self._dtype)
            else:
                # Nothing known of the elements yet: the first write shapes the array.
                self._buffer = _array.zeros([0], dtype=self._dtype)
                self._empty = True

    # ---- what a TensorArray is made of ----
    def _with_buffer(self, buffer):
        ta = TensorArray.__new__(TensorArray)
        ta.__dict__.update(self.__dict__)
        ta._buffer = buffer
        ta._empty = False
        es = buffer.shape._dims
        if es is not None and len(es) >= 1 and self._element_shape is None:
            ta._element_shape = list(es[1:])
        return ta

    def _placeholder(self):
        """Whether the array may still be the empty placeholder of unknown
        elements (inside a loop it entered as one, its rank is unknown)."""
        return self._empty or self._buffer.shape._dims is None

    def _invariant(self):
        """The shape its tensor may take in a while_loop."""
        if self._placeholder():
            return None
        return [None] + self._known_elements(self._buffer.shape._dims[1:])

    def _known_elements(self, dims):
        """`dims` with what the array's element_shape adds."""
        es = self._element_shape
        if es is None or len(es) != len(dims):
            return list(dims)
        return [a if a is not None else b for a, b in zip(es, dims)]

    def _values_read(self):
        """The array's values are used (not only written to)."""
        if self._lineage is not None:
            self._lineage.read = True

    @property
    def flow(self):
        self._values_read()
        return self._buffer

    @property
    def handle(self):
        self._values_read()
        return self._buffer

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
        self._values_read()
        with _fw.name_scope(name or "TensorArrayRead"):
            return self._buffer[_index(index)]

    def gather(self, indices, element_shape=None, name=None):
        self._values_read()
        with _fw.name_scope(name or "TensorArrayGather"):
            from distflow import sparse_ops
            return sparse_ops.gather(self._buffer, _fw.convert_to_tensor(indices, dtype=_dtypes.int32))

    def stack(self, name=None):
        self._values_read()
        return _array.identity(self._buffer, name=name or "TensorArrayStack")

    def concat(self, name=None):
        self._values_read()
        with _fw.name_scope(name or "TensorArrayConcat"):
            rest = _array.shape(self._buffer)[2:]
            return _array.reshape(self._buffer, _array.concat([_fw.constant([-1]), rest], 0))

    def size(self, name=None):
        if not self._dynamic and self._size is not None:
            return _fw.convert_to_tensor(self._size, dtype=_dtypes.int32)
        return _array.shape(self._buffer, name=name or "TensorArraySize")[0]

    # ---- writing: each returns the new array ----
    def _base(self, rows, value):
        """The array as [rows, *value's shape]: zeros while it is the
        placeholder, grown with zero rows if `rows` is more than it has."""
        b = self._buffer
        if not self._placeholder() and not self._dynamic:
            return b
        # The placeholder's elements (none) or the array's, then zeros, cut
        # to rows x element size: the array padded with zero rows, in any case.
        elem = _array.size(value)
        flat = _array.concat([_array.reshape(b, [-1]), _array.zeros(_array.reshape(rows * elem, [1]), self._dtype)], 0)
        flat = _array.slice(flat, [0], _array.reshape(rows * elem, [1]))
        return _array.reshape(flat, _array.concat([_array.reshape(rows, [1]), _array.shape(value)], 0))

    def _rows_for(self, last):
        """How many rows the array needs to hold index `last`."""
        if not self._dynamic:
            return _index(self._size)
        have = _array.shape(self._buffer)[0]  # 0 for the placeholder
        rows = _math.maximum(have, last + 1)
        if self._size is not None:
            rows = _math.maximum(rows, _index(self._size))
        return rows

    def _shaped(self, out, value):
        """`out` with the static shape [?, *elements] that its ops lose."""
        es = value.shape._dims
        if es is None:
            return out
        es = self._known_elements(es)
        if all(d is not None for d in es):
            return _array.reshape(out, [-1] + es)
        return _fw.placeholder_with_default(out, [None] + es)

    def write(self, index, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        self._check_element(value)
        with _fw.name_scope(name or "TensorArrayWrite"):
            i = _index(index)
            base = self._base(self._rows_for(i), value)
            row = _array.expand_dims(value, 0)
            out = _array.concat([base[:i], row, base[i + 1:]], 0)
            return self._with_buffer(self._shaped(out, value))

    def unstack(self, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        dims = value.shape._dims
        if dims is not None and len(dims) >= 1:
            self._check_element_dims(dims[1:], value)
            if not self._dynamic and isinstance(self._size, int) and dims[0] is not None and dims[0] != self._size:
                raise ValueError(f"TensorArray.unstack: the array has size {self._size} but '{value.name}' has "
                                 f"{dims[0]} rows")
        return self._with_buffer(_array.identity(value, name=name or "TensorArrayUnstack"))

    def scatter(self, indices, value, name=None):
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        from distflow import sparse_ops
        with _fw.name_scope(name or "TensorArrayScatter"):
            idx = _fw.convert_to_tensor(indices, dtype=_dtypes.int32)
            first = value[0]
            base = self._base(self._rows_for(_math.reduce_max(idx)), first)
            rows = _array.shape(base)[0]
            if self._dtype.is_floating:
                # The replaced rows pass no gradient back to the old array.
                hit = _math.reduce_max(_array.one_hot(idx, rows, dtype=self._dtype), axis=0)
                keep = 1.0 - hit
                keep = _array.reshape(keep, _array.concat([_array.reshape(rows, [1]),
                                                           _array.ones_like(_array.shape(first))], 0))
                base = base * keep
            # Later stitches win: the scattered rows replace the array's.
            out = sparse_ops.dynamic_stitch([_array.range(rows), idx], [base, value])
            return self._with_buffer(self._shaped(out, first))

    def split(self, value, lengths, name=None):
        """The array of the pieces of `value` along its first dimension, of
        `lengths` rows each. The array is one tensor, so the pieces must be
        equally long: different lengths are a ValueError when known here and
        an InvalidArgumentError naming them when the step runs."""
        from distflow import control_flow_ops
        import numpy as np
        value = _fw.convert_to_tensor(value, dtype=self._dtype)
        static = None if isinstance(lengths, _fw.Tensor) else np.asarray(lengths, dtype=np.int64)
        lengths = _fw.convert_to_tensor(lengths, dtype=_dtypes.int32)
        dims = value.shape._dims
        if dims is not None and len(dims) == 0:
            raise ValueError(f"TensorArray.split: '{value.name}' is a scalar; it needs a first dimension to split")
        if lengths.shape._dims is not None and len(lengths.shape._dims) != 1:
            raise ValueError(f"TensorArray.split: lengths '{lengths.name}' must be a vector, not of shape "
                             f"{lengths.shape}")
        if static is not None and len(set(int(k) for k in static.ravel())) > 1:
            raise ValueError(f"TensorArray.split: lengths {list(static.ravel())} differ; distflow's TensorArray "
                             f"holds one tensor, so its elements must all have the same length")
        n = _array.size(lengths)
        if not self._dynamic and isinstance(self._size, int) and lengths.shape._dims is not None and \
                lengths.shape._dims[0] is not None and lengths.shape._dims[0] != self._size:
            raise ValueError(f"TensorArray.split: the array has size {self._size} but lengths has "
                             f"{lengths.shape._dims[0]} entries")
        with _fw.name_scope(name or "TensorArraySplit"):
            first = lengths[0]
            same = _math.reduce_all(_math.equal(lengths, first))
            total = _math.equal(_math.reduce_sum(lengths), _array.shape(value)[0])
            check = control_flow_ops.Assert(
                _math.logical_and(same, total),
                [f"TensorArray.split: distflow's TensorArray holds equally long elements; the lengths must be "
                 f"equal and sum to the rows of '{value.name}'; lengths:", lengths, "rows:", _array.shape(value)[0]],
                summarize=16)
            with _fw.control_dependencies([check]):
                shape = _array.concat([_array.reshape(n, [1]), _array.reshape(first, [1]), _array.shape(value)[1:]],
                                      0)
                out = _array.reshape(value, shape)
            es = None
            if dims is not None:
                piece = static.ravel()[0] if static is not None and static.size > 0 else None
                es = [int(piece) if piece is not None else None] + list(dims[1:])
                self._check_element_dims(es, value)
                if all(d is not None for d in es):
                    out = _array.reshape(out, [-1] + es)
            return self._with_buffer(out)

    def identity(self):
        return self._with_buffer(_array.identity(self._buffer))

    def close(self, name=None):
        return _fw.group(name=name or "TensorArrayClose")

    def grad(self, source, flow=None, name=None):
        raise NotImplementedError("TensorArray.grad: distflow's arrays get gradients from tf.gradients directly")

    def _check_element(self, value):
        dims = value.shape._dims
        if dims is not None:
            self._check_element_dims(dims, value)

    def _check_element_dims(self, dims, value):
        es = self._element_shape
        if es is None or not self._infer_shape or len(es) != len(dims):
            if es is not None and self._infer_shape and len(es) != len(dims):
                raise ValueError(f"TensorArray: '{value.name}' has elements of shape {list(dims)} but the array's "
                                 f"are {es}")
            return
        for a, b in zip(es, dims):
            if a is not None and b is not None and a != b:
                raise ValueError(f"TensorArray: '{value.name}' has elements of shape {list(dims)} but the array's "
                                 f"are {es}")
