"""TF1's queues and readers (tf.FIFOQueue, tf.RandomShuffleQueue,
tf.PaddingFIFOQueue, tf.TFRecordReader, tf.FixedLengthRecordReader,
tf.WholeFileReader, tf.TextLineReader) over the C++ queue and reader
resources (src/kernels/cpu/queue.h, reader_kernels.cc).

A queue's op outputs a handle; every op that uses the queue takes it, so
the placer puts those ops on the queue's device, as TensorFlow colocates
them: a queue made under tf.device("/job:ps/task:0") is fed and drained
there by whichever task runs the ops. Blocking ops hold no thread."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw


def _encode_shapes(shapes):
    """Shapes as the ops' `shapes` attribute: each as its rank, then its
    dimensions; -1 for unknown (src/graph/shape_rules.h)."""
    flat = []
    for s in shapes:
        dims = _fw._shape_list(s)
        if dims is None:
            flat.append(-1)
        else:
            flat.append(len(dims))
            flat.extend(-1 if d is None else int(d) for d in dims)
    return flat


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _component_shapes(dtypes, shapes):
    """TF's rule: with one dtype given bare (not in a list), `shapes` is
    that component's shape; otherwise one shape per dtype."""
    if shapes is None:
        return None
    if not isinstance(dtypes, (list, tuple)):
        return [shapes]
    return list(shapes)


class QueueBase:
    """What the queue classes share (tf.QueueBase): enqueue, enqueue_many,
    dequeue, dequeue_many, dequeue_up_to, close, size, is_closed. Tuples
    are lists of tensors, or dicts when the queue was made with `names`."""

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = [_dtypes.as_dtype(d) for d in dtypes]
        self._shapes = [None] * len(self._dtypes) if shapes is None else list(shapes)
        if len(self._shapes) != len(self._dtypes):
            raise ValueError(f"Queue shapes must have the same length as dtypes ({len(self._shapes)} vs "
                             f"{len(self._dtypes)})")
        self._names = list(names) if names is not None else None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name

    queue_ref = property(lambda self: self._queue_ref)
    name = property(lambda self: self._name)
    dtypes = property(lambda self: list(self._dtypes))
    shapes = property(lambda self: [_fw.TensorShape(_fw._shape_list(s)) for s in self._shapes])
    names = property(lambda self: self._names)

    def _flatten(self, vals):
        if self._names is not None:
            if not isinstance(vals, dict):
                raise TypeError(f"Queue '{self._name}' has names {self._names}: enqueue a dict")
            if sorted(vals) != sorted(self._names):
                raise ValueError(f"Queue '{self._name}' enqueues keys {sorted(self._names)}, got {sorted(vals)}")
            vals = [vals[n] for n in self._names]
        vals = _as_list(vals)
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Queue '{self._name}' holds tuples of {len(self._dtypes)} components, got {len(vals)}")
        out = []
        for i, (v, dt) in enumerate(zip(vals, self._dtypes)):
            t = _fw.convert_to_tensor(v, dtype=dt)
            if t.dtype != dt:
                raise ValueError(f"Queue '{self._name}': component {i} has dtype {t.dtype.name}, the queue holds "
                                 f"{dt.name}")
            out.append(t)
        return out

    def _unflatten(self, outs):
        outs = _as_list(outs)
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else list(outs)

    def enqueue(self, vals, name=None):
        return _fw._apply("QueueEnqueue", [self._queue_ref, self._flatten(vals)], name=name or f"{self._name}_enqueue")

    def enqueue_many(self, vals, name=None):
        return _fw._apply("QueueEnqueueMany", [self._queue_ref, self._flatten(vals)],
                          name=name or f"{self._name}_EnqueueMany")

    def _attrs(self, shapes):
        return {"component_types": [d._distflow_dtype for d in self._dtypes], "shapes": _encode_shapes(shapes)}

    def dequeue(self, name=None):
        outs = _fw._apply("QueueDequeue", [self._queue_ref], self._attrs(self._shapes),
                          name=name or f"{self._name}_Dequeue")
        return self._unflatten(outs)

    def dequeue_many(self, n, name=None):
        n = _fw.convert_to_tensor(n, dtype=_dtypes.int32)
        outs = _fw._apply("QueueDequeueMany", [self._queue_ref, n], self._attrs(self._shapes),
                          name=name or f"{self._name}_DequeueMany")
        return self._unflatten(outs)

    def dequeue_up_to(self, n, name=None):
        n = _fw.convert_to_tensor(n, dtype=_dtypes.int32)
        outs = _fw._apply("QueueDequeueUpTo", [self._queue_ref, n], self._attrs(self._shapes),
                          name=name or f"{self._name}_DequeueUpTo")
        return self._unflatten(outs)

    def close(self, cancel_pending_enqueues=False, name=None):
        return _fw._apply("QueueClose", [self._queue_ref], {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
                          name=name or f"{self._name}_Close")

    def size(self, name=None):
        return _fw._apply("QueueSize", [self._queue_ref], name=name or f"{self._name}_Size")

    def is_closed(self, name=None):
        return _fw._apply("QueueIsClosed", [self._queue_ref], name=name or f"{self._name}_IsClosed")


def _make_queue(op_type, dtypes, shapes, capacity, shared_name, name, extra=None):
    dtypes = _as_list(dtypes)
    attrs = {"component_types": [_dtypes.as_dtype(d)._distflow_dtype for d in dtypes],
             "shapes": _encode_shapes(shapes) if shapes is not None else [],
             "capacity": int(capacity), "shared_name": shared_name or ""}
    attrs.update(extra or {})
    return _fw._apply(op_type, [], attrs, name=name)


class FIFOQueue(QueueBase):
    """tf.FIFOQueue: first in, first out, at most `capacity` elements."""

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None, name="fifo_queue"):
        shapes = _component_shapes(dtypes, shapes)
        dtypes = _as_list(dtypes)
        ref = _make_queue("FIFOQueue", dtypes, shapes, capacity, shared_name, name)
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """tf.PaddingFIFOQueue: dequeue_many pads each component to the batch's
    largest shape (dimensions given as None vary)."""

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None, name="padding_fifo_queue"):
        shapes = _component_shapes(dtypes, shapes)
        dtypes = _as_list(dtypes)
        if len(shapes) != len(dtypes):
            raise ValueError("PaddingFIFOQueue needs one shape per component")
        for s in shapes:
            if _fw._shape_list(s) is None:
                raise ValueError("PaddingFIFOQueue needs shapes of known rank; use None for dimensions that vary")
        ref = _make_queue("PaddingFIFOQueue", dtypes, shapes, capacity, shared_name, name)
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """tf.RandomShuffleQueue: dequeues take random elements, keeping
    `min_after_dequeue` back until the queue is closed."""

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None, shared_name=None,
                 name="random_shuffle_queue"):
        shapes = _component_shapes(dtypes, shapes)
        dtypes = _as_list(dtypes)
        seed1, seed2 = _fw.get_seed(seed)
        ref = _make_queue("RandomShuffleQueue", dtypes, shapes, capacity, shared_name, name,
                          {"min_after_dequeue": int(min_after_dequeue), "seed": int(seed1 or 0),
                           "seed2": int(seed2 or 0)})
        super().__init__(dtypes, shapes, names, ref)


class ReaderBase:
    """tf.ReaderBase: read(queue) gives (key, value), the next record of the
    current file, taking file names from `queue` (a queue of strings)."""

    def __init__(self, reader_ref):
        self._reader_ref = reader_ref

    reader_ref = property(lambda self: self._reader_ref)

    def read(self, queue, name=None):
        ref = queue.queue_ref if isinstance(queue, QueueBase) else queue
        return _fw._apply("ReaderRead", [self._reader_ref, ref], name=name or "ReaderRead")

    def read_up_to(self, queue, num_records, name=None):
        """Up to `num_records` (keys, values) as two string vectors; fewer
        at the end of the input."""
        ref = queue.queue_ref if isinstance(queue, QueueBase) else queue
        n = _fw.convert_to_tensor(num_records, dtype=_dtypes.int64)
        return _fw._apply("ReaderReadUpTo", [self._reader_ref, ref, n], name=name or "ReaderReadUpTo")

    def num_records_produced(self, name=None):
        return _fw._apply("ReaderNumRecordsProduced", [self._reader_ref], name=name)

    @property
    def supports_serialize(self):
        return False


class TFRecordReader(ReaderBase):
    def __init__(self, name=None, options=None):
        compression = ""
        if options is not None:
            from distflow.python_io import TFRecordOptions
            compression = TFRecordOptions.get_compression_type_string(options)
        super().__init__(_fw._apply("TFRecordReader", [], {"compression_type": compression},
                                    name=name or "TFRecordReader"))


class FixedLengthRecordReader(ReaderBase):
    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None, name=None, encoding=None):
        attrs = {"record_bytes": int(record_bytes), "header_bytes": int(header_bytes or 0),
                 "footer_bytes": int(footer_bytes or 0), "hop_bytes": int(hop_bytes or 0),
                 "encoding": encoding or ""}
        super().__init__(_fw._apply("FixedLengthRecordReader", [], attrs, name=name or "FixedLengthRecordReader"))


class WholeFileReader(ReaderBase):
    def __init__(self, name=None):
        super().__init__(_fw._apply("WholeFileReader", [], {}, name=name or "WholeFileReader"))


class TextLineReader(ReaderBase):
    def __init__(self, skip_header_lines=None, name=None):
        super().__init__(_fw._apply("TextLineReader", [], {"skip_header_lines": int(skip_header_lines or 0)},
                                    name=name or "TextLineReader"))
