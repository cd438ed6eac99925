"""TF1's input pipelines over queues: input producers (string_input_producer,
input_producer, range_input_producer, slice_input_producer) and batching
(batch, shuffle_batch, batch_join, shuffle_batch_join). Each adds a queue
and a QueueRunner (GraphKeys.QUEUE_RUNNERS) whose threads fill it once
start_queue_runners (or a Supervisor / MonitoredSession) starts them.

An input producer's thread reads its input once, then enqueues it epoch by
epoch (reshuffled each epoch when `shuffle`), closing the queue after
`num_epochs` epochs, so the reads downstream end with OutOfRange."""
import numpy as np

from distflow import array_ops as _array_ops
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow.data_flow_ops import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from distflow.train.queue_runner import QueueRunner, add_queue_runner


class _ProducerRunner(QueueRunner):
    """One thread: evaluates `sources` once, then enqueues them (a
    permutation per epoch when shuffling) through placeholders."""

    def __init__(self, queue, sources, placeholders, enqueue_op, num_epochs, shuffle, seed):
        super().__init__(queue, [enqueue_op])
        self._sources, self._placeholders = sources, placeholders
        self._num_epochs, self._shuffle = num_epochs, shuffle
        self._rng = np.random.RandomState(seed)

    def _run(self, sess, enqueue_op, coord):
        epoch = 0
        values = None

        def feeds():
            nonlocal values, epoch
            if self._num_epochs is not None and epoch >= self._num_epochs:
                return StopIteration
            if values is None:
                values = [np.asarray(v, dtype=object) if isinstance(v, (bytes, str)) or
                          (isinstance(v, np.ndarray) and v.dtype.kind in "OSU") else np.asarray(v)
                          for v in sess.run(self._sources)]
            n = len(values[0])
            order = self._rng.permutation(n) if self._shuffle else np.arange(n)
            epoch += 1
            return {p: v[order] for p, v in zip(self._placeholders, values)}

        self._feed_fn = feeds
        return super()._run(sess, enqueue_op, coord)


def _producer(sources, element_shapes, num_epochs, shuffle, seed, capacity, shared_name, name, summary_name=None):
    with _fw.name_scope(name):
        sources = [_fw.convert_to_tensor(s) for s in sources]
        for s in sources:
            if s.shape.ndims == 0:
                raise ValueError(f"An input producer needs tensors with a first dimension; '{s.name}' is a scalar")
        dtypes = [s.dtype for s in sources]
        queue = FIFOQueue(capacity=capacity, dtypes=dtypes, shapes=element_shapes, shared_name=shared_name,
                          name="fifo_queue")
        placeholders = [_fw.placeholder(s.dtype, shape=[None] + list(s.shape.as_list()[1:])
                                        if s.shape.ndims is not None else None) for s in sources]
        enqueue = queue.enqueue_many(placeholders)
        seed1, seed2 = _fw.get_seed(seed)
        runner = _ProducerRunner(queue, sources, placeholders, enqueue, num_epochs, shuffle,
                                 None if seed1 is None else (seed1 * 7919 + (seed2 or 0)) % (2 ** 32))
        add_queue_runner(runner)
    return queue


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True, seed=None, capacity=32,
                   shared_name=None, summary_name=None, name=None, cancel_op=None):
    """A queue of input_tensor's rows, num_epochs times (None: forever)."""
    t = _fw.convert_to_tensor(input_tensor)
    shape = element_shape if element_shape is not None else (
        t.shape.as_list()[1:] if t.shape.ndims is not None else None)
    return _producer([t], [shape], num_epochs, shuffle, seed, capacity, shared_name, name or "input_producer")


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None,
                          name=None, cancel_op=None):
    """A queue of file names (strings), num_epochs times, shuffled each epoch."""
    if isinstance(string_tensor, (list, tuple)) and not string_tensor:
        raise ValueError("string_input_producer needs at least one string")
    t = _fw.convert_to_tensor(string_tensor, dtype=_dtypes.string)
    return _producer([t], [[]], num_epochs, shuffle, seed, capacity, shared_name,
                     name or "input_producer")


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None, name=None):
    """A queue of the integers 0 .. limit-1."""
    with _fw.name_scope(name or "input_producer"):
        r = _array_ops.range(limit)
    return _producer([r], [[]], num_epochs, shuffle, seed, capacity, shared_name, name or "input_producer")


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None,
                         name=None):
    """One row of every tensor of tensor_list at a time (the same row of each)."""
    tensors = [_fw.convert_to_tensor(t) for t in tensor_list]
    if not tensors:
        raise ValueError("slice_input_producer needs at least one tensor")
    shapes = [t.shape.as_list()[1:] if t.shape.ndims is not None else None for t in tensors]
    queue = _producer(tensors, shapes, num_epochs, shuffle, seed, capacity, shared_name,
                      name or "input_producer")
    return _as_list(queue.dequeue())


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _flatten(tensors):
    """(list of tensors, a function rebuilding the caller's structure)."""
    if isinstance(tensors, dict):
        keys = sorted(tensors)
        return [_fw.convert_to_tensor(tensors[k]) for k in keys], lambda out: dict(zip(keys, _as_list(out)))
    if isinstance(tensors, (list, tuple)):
        return [_fw.convert_to_tensor(t) for t in tensors], lambda out: _as_list(out)
    return [_fw.convert_to_tensor(tensors)], lambda out: _as_list(out)[0]


def _element_shapes(tensors, shapes, enqueue_many, dynamic_pad):
    if shapes is not None:
        return [_fw._shape_list(s) for s in shapes]
    out = []
    for t in tensors:
        dims = t.shape.as_list() if t.shape.ndims is not None else None
        if dims is not None and enqueue_many:
            dims = dims[1:]
        out.append(dims)
    if dynamic_pad:
        for t, s in zip(tensors, out):
            if s is None:
                raise ValueError(f"batch(dynamic_pad=True) needs the rank of '{t.name}'")
    return out


def _batch(tensor_lists, batch_size, capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
           shared_name, name, min_after_dequeue=None, seed=None, num_threads=1):
    flat_lists, rebuild = [], None
    for tl in tensor_lists:
        flat, rb = _flatten(tl)
        flat_lists.append(flat)
        rebuild = rebuild or rb
    first = flat_lists[0]
    dtypes = [t.dtype for t in first]
    for fl in flat_lists[1:]:
        if [t.dtype for t in fl] != dtypes:
            raise ValueError("batch_join: every tensor list needs the same dtypes")
    element_shapes = _element_shapes(first, shapes, enqueue_many, dynamic_pad)
    with _fw.name_scope(name):
        if min_after_dequeue is not None:
            queue = RandomShuffleQueue(capacity=capacity, min_after_dequeue=min_after_dequeue, dtypes=dtypes,
                                       shapes=element_shapes, seed=seed, shared_name=shared_name,
                                       name="random_shuffle_queue")
        elif dynamic_pad:
            queue = PaddingFIFOQueue(capacity=capacity, dtypes=dtypes, shapes=element_shapes,
                                     shared_name=shared_name, name="padding_fifo_queue")
        else:
            queue = FIFOQueue(capacity=capacity, dtypes=dtypes, shapes=element_shapes, shared_name=shared_name,
                              name="fifo_queue")
        enqueue_ops = []
        for fl in flat_lists:
            op = queue.enqueue_many(fl) if enqueue_many else queue.enqueue(fl)
            enqueue_ops.extend([op] * num_threads)
        add_queue_runner(QueueRunner(queue, enqueue_ops))
        out = queue.dequeue_up_to(batch_size) if allow_smaller_final_batch else queue.dequeue_many(batch_size)
    return rebuild(out)


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None, dynamic_pad=False,
          allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of batch_size from a FIFO queue that num_threads threads fill."""
    return _batch([tensors], batch_size, capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                  shared_name, name or "batch", num_threads=num_threads)


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None, dynamic_pad=False,
               allow_smaller_final_batch=False, shared_name=None, name=None):
    """As batch, with one thread per tensor list."""
    return _batch(tensors_list, batch_size, capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                  shared_name, name or "batch_join")


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None, enqueue_many=False,
                  shapes=None, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Batches of batch_size drawn at random from a queue holding at least
    min_after_dequeue elements (until it is closed)."""
    return _batch([tensors], batch_size, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name or "shuffle_batch", min_after_dequeue=min_after_dequeue, seed=seed,
                  num_threads=num_threads)


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None, enqueue_many=False,
                       shapes=None, allow_smaller_final_batch=False, shared_name=None, name=None):
    return _batch(tensors_list, batch_size, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                  shared_name, name or "shuffle_batch_join", min_after_dequeue=min_after_dequeue, seed=seed)
