"""tf.train.QueueRunner, add_queue_runner, start_queue_runners: threads
that run a queue's enqueue ops through the session until the Coordinator
stops them or the input ends (OutOfRange), then close the queue.

A runner's threads use the session without its hooks or step counting
(a monitored session's raw session), as TensorFlow's do."""
import threading

from distflow import errors as _errors
from distflow import framework as _fw
from distflow.graph_keys import GraphKeys


def _raw(sess):
    """What the threads run steps with: a monitored session's raw session."""
    monitored = getattr(sess, "_monitored", None)
    if monitored is None:
        return sess

    class _Raw(_fw.Session):
        def __init__(self):  # noqa: super-init-not-called
            self.graph = sess.graph
            self._sess = self

        def _run_raw(self, feeds, outputs, targets, timeout, trace=False):
            return monitored.run_raw(feeds, outputs, targets)

    return _Raw()


def _closed_or_cancelled(e):
    return isinstance(e, (_errors.OutOfRangeError, _errors.CancelledError))


class QueueRunner:
    """Runs `enqueue_ops` (one thread each) until they fail with
    OutOfRange (the input ended: the queue is then closed) or the
    coordinator stops (the queue is closed, pending enqueues cancelled)."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None, import_scope=None, feed_fn=None):
        if queue_runner_def is not None:
            raise NotImplementedError("QueueRunner(queue_runner_def=...)")
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and enqueue ops")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        self._closed_types = tuple(queue_closed_exception_types or (_errors.OutOfRangeError,))
        self._feed_fn = feed_fn  # distflow: feeds for each run (input producers' epochs)
        self._lock = threading.Lock()
        self._runs = 0
        self._exceptions = []

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: list(self._enqueue_ops))
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    name = property(lambda self: self._queue.name)

    @property
    def exceptions_raised(self):
        return list(self._exceptions)

    def _run(self, sess, enqueue_op, coord):
        decremented = False
        try:
            while coord is None or not coord.should_stop():
                feed = self._feed_fn() if self._feed_fn is not None else None
                try:
                    if feed is StopIteration:  # the input producer's epochs are done
                        raise self._closed_types[0]
                    sess.run(enqueue_op, feed_dict=feed)
                except self._closed_types:
                    # The input ended: the last thread closes the queue.
                    with self._lock:
                        self._runs -= 1
                        decremented = True
                        last = self._runs == 0
                    if last:
                        try:
                            sess.run(self._close_op)
                        except Exception:  # noqa: B902 (the session may be closing)
                            pass
                    return
        except Exception as e:  # noqa: B902 (reported to the coordinator, as TF)
            if coord is not None and coord.should_stop() and _closed_or_cancelled(e):
                return  # stopped while blocked: the cancel op ended the enqueue
            with self._lock:
                self._exceptions.append(e)
            if coord is not None:
                coord.request_stop(e)
            else:
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs -= 1

    def _close_on_stop(self, sess, coord):
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception:  # noqa: B902 (the session may be closing)
            pass

    def create_threads(self, sess, coord=None, daemon=False, start=False):
        raw = _raw(sess)
        with self._lock:
            self._runs = len(self._enqueue_ops)
            self._exceptions = []
        threads = [threading.Thread(target=self._run, args=(raw, op, coord), daemon=daemon,
                                    name=f"QueueRunnerThread-{self.name}-{i}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(raw, coord), daemon=daemon,
                                            name=f"QueueRunnerThread-{self.name}-close_on_stop"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS):
    _fw.get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True, collection=GraphKeys.QUEUE_RUNNERS):
    """Starts the threads of every queue runner of the session's graph."""
    sess = sess or _fw.get_default_session()
    if sess is None:
        raise ValueError("Cannot start queue runners: no default session is registered. Use `with "
                         "sess.as_default()` or pass an explicit session to tf.start_queue_runners(sess=sess)")
    graph = getattr(sess, "graph", None) or _fw.get_default_graph()
    threads = []
    for qr in graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
