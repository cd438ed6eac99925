"""tf.train.Coordinator: threads that stop together. request_stop() asks
every registered thread to stop; join() waits for them (a bounded wait),
and re-raises the first exception a thread reported."""
import contextlib
import sys
import threading
import time


class Coordinator:
    """Thread-safe: every method may be called from any thread."""

    def __init__(self, clean_stop_exception_types=None):
        self._clean = tuple(clean_stop_exception_types or (_out_of_range(),))
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info = None
        self._threads = set()
        self._joined = False

    def request_stop(self, ex=None):
        with self._lock:
            if ex is not None and self._exc_info is None and not isinstance(_value(ex), self._clean):
                self._exc_info = ex if isinstance(ex, tuple) else (type(ex), ex, ex.__traceback__)
            self._stop_event.set()

    def clear_stop(self):
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self):
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        try:
            yield
        except BaseException:  # noqa: B902 (TF's contract: any exception stops the threads)
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None):
        return self._stop_event.wait(timeout)

    def register_thread(self, thread):
        with self._lock:
            self._threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Waits for the registered threads and `threads` once a stop was
        requested; raises the reported exception, or RuntimeError naming
        the threads still alive after the grace period."""
        threads = set(threads or []) | self._threads
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._threads = set()
            exc = self._exc_info
        if exc is not None:
            raise exc[1].with_traceback(exc[2])
        if alive and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: {' '.join(alive)}")

    @property
    def joined(self):
        return self._joined

    def raise_requested_exception(self):
        with self._lock:
            if self._exc_info is not None:
                raise self._exc_info[1].with_traceback(self._exc_info[2])


def _value(ex):
    return ex[1] if isinstance(ex, tuple) else ex


def _out_of_range():
    from distflow import errors
    return getattr(errors, "OutOfRangeError", StopIteration)


class LooperThread(threading.Thread):
    """Calls target(*args) every timer_interval_secs until the coordinator stops."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        super().__init__(daemon=True)
        self._coord, self._interval = coord, timer_interval_secs
        self._target_fn, self._args, self._kwargs = target, args or (), kwargs or {}
        coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        t = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        t.start()
        return t

    def run(self):
        with self._coord.stop_on_exception():
            while not self._coord.should_stop():
                self._target_fn(*self._args, **self._kwargs)
                if self._interval is None or self._coord.wait_for_stop(self._interval):
                    break
