"""tf.summary.FileWriter and FileWriterCache over the C++ EventWriter
(distflow._distflow.EventWriter; format in distflow/train/event_writer.h).

Records are buffered in C++ and flushed every max_queue records, when
flush_secs have passed at a write, and on flush() and close(); there is no
background thread. A FileWriter may be used from several threads (the C++
writer holds a mutex)."""
import threading
import time

import numpy as np

from distflow import _distflow
from distflow import framework as _fw
from distflow.proto import event_pb2, summary_pb2


def _summary_bytes(summary):
    """The serialized Summary in what sess.run returned or a Summary proto."""
    if isinstance(summary, np.ndarray):
        if summary.size != 1:
            raise ValueError(f"FileWriter.add_summary takes one serialized summary, got an array of shape "
                             f"{list(summary.shape)}")
        summary = summary.reshape(()).item()
    if isinstance(summary, (bytes, bytearray)):
        return bytes(summary)
    if isinstance(summary, summary_pb2.Summary):
        return summary.SerializeToString()
    if hasattr(summary, "SerializeToString") and type(summary).__name__ == "Summary":
        return summary.SerializeToString()  # a Summary of another generated module, same wire format
    raise TypeError(f"FileWriter.add_summary takes a serialized Summary (bytes, as sess.run returns a summary "
                    f"op's value) or a tf.Summary, not {type(summary).__name__}")


class FileWriter:
    """Writes Summary protos, graphs and run metadata to an event file in
    `logdir` (created if missing); TensorBoard reads the directory."""

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None, filename_suffix=None,
                 session=None):
        if session is not None:
            raise NotImplementedError("FileWriter(session=...) (TensorFlow 2's summary writer resources)")
        self._logdir = str(logdir)
        self._options = (filename_suffix or "", int(max_queue), float(flush_secs))
        self._lock = threading.Lock()
        self._writer = _distflow.EventWriter(self._logdir, *self._options)
        self._closed = False
        if graph is not None or graph_def is not None:
            self.add_graph(graph, graph_def=graph_def)

    def get_logdir(self):
        return self._logdir

    def _write(self, method, *args):
        with self._lock:
            if self._closed:
                return  # TensorFlow drops what is added after close()
            getattr(self._writer, method)(*args)

    def add_summary(self, summary, global_step=None):
        """Adds one Summary (serialized bytes, as a summary op evaluates
        to, or a tf.Summary) at step global_step (default 0)."""
        self._write("write_summary", 0 if global_step is None else int(global_step), _summary_bytes(summary))

    def add_event(self, event):
        """Adds an Event as it is (set its wall_time and step yourself)."""
        if not isinstance(event, event_pb2.Event):
            raise TypeError(f"FileWriter.add_event takes a tf.Event, not {type(event).__name__}")
        self._write("write_event", event.SerializeToString())

    def add_session_log(self, session_log, global_step=None):
        event = event_pb2.Event(wall_time=time.time(), session_log=session_log)
        if global_step is not None:
            event.step = int(global_step)
        self.add_event(event)

    def add_graph(self, graph, global_step=None, graph_def=None):
        """Adds the graph (a tf.Graph, written as distflow's GraphDef), or
        graph_def (a serialized GraphDef or a proto with SerializeToString)."""
        step = 0 if global_step is None else int(global_step)
        if graph is not None and graph_def is not None:
            raise ValueError("FileWriter.add_graph takes a graph or a graph_def, not both")
        if graph is not None:
            if not isinstance(graph, _fw.Graph):
                raise TypeError(f"FileWriter.add_graph takes a tf.Graph, not {type(graph).__name__}")
            self._write("write_graph", graph._root, step)
        elif graph_def is not None:
            data = graph_def if isinstance(graph_def, bytes) else graph_def.SerializeToString()
            self.add_event(event_pb2.Event(wall_time=time.time(), step=step, graph_def=data))

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        """Adds a step's run metadata under `tag` (bytes, or a proto with
        SerializeToString)."""
        data = run_metadata if isinstance(run_metadata, bytes) else run_metadata.SerializeToString()
        self._write("write_run_metadata", 0 if global_step is None else int(global_step), str(tag), data)

    def flush(self):
        self._write("flush")

    def close(self):
        """Flushes and closes the file; later additions are dropped until reopen()."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._writer.close()

    def reopen(self):
        """After close(): a new event file in the same directory."""
        with self._lock:
            if self._closed:
                self._writer = _distflow.EventWriter(self._logdir, *self._options)
                self._closed = False

    @property
    def event_file_path(self):
        return self._writer.path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False


class FileWriterCache:
    """One FileWriter per log directory, shared by whoever asks (hooks, the
    Supervisor), made with the default graph on first use."""

    _cache = {}
    _lock = threading.RLock()

    @staticmethod
    def get(logdir):
        with FileWriterCache._lock:
            writer = FileWriterCache._cache.get(logdir)
            if writer is None:
                writer = FileWriter(logdir, graph=_fw.get_default_graph())
                FileWriterCache._cache[logdir] = writer
            return writer

    @staticmethod
    def clear():
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache.clear()
