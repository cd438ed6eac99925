"""The hooks TensorFlow ships: stop at a step, log tensors, NaN checks, final ops."""
import os
import time

from distflow import framework as _fw
from distflow.train.session_run_hook import SessionRunArgs, SessionRunHook
from distflow.train.training_util import get_global_step


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches last_step (or num_steps
    past where the session started). Reads the global step the monitored
    session already fetches, so it adds nothing to a step."""

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook takes one of num_steps and last_step")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        if get_global_step() is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = session._global_step_value() + self._num_steps

    def after_run(self, run_context, run_values):
        if run_context.session._global_step_value() >= self._last_step:
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Logs the values of `tensors` (a list or a {tag: tensor} dict; tensors
    or their names) every `every_n_iter` steps or `every_n_secs` seconds,
    and at the end with at_end."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None):
        if (every_n_iter is None) == (every_n_secs is None) and not at_end:
            raise ValueError("LoggingTensorHook needs exactly one of every_n_iter and every_n_secs")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"LoggingTensorHook: every_n_iter must be positive, got {every_n_iter}")
        if not isinstance(tensors, dict):
            tensors = {(t if isinstance(t, str) else t.name): t for t in tensors}
        self._tags = list(tensors)
        self._tensors = tensors
        self._every_n_iter, self._every_n_secs, self._at_end = every_n_iter, every_n_secs, at_end
        self._formatter = formatter
        self._iter = 0
        self._last_time = None

    def begin(self):
        g = _fw.get_default_graph()
        # As TF's hooks: a name without an output index is the op's output 0.
        self._fetch = {tag: (g.as_graph_element(t if ":" in t else t + ":0", allow_operation=False)
                             if isinstance(t, str) else t)
                       for tag, t in self._tensors.items()}

    def _due(self):
        if self._every_n_iter is not None:
            return self._iter % self._every_n_iter == 0
        if self._every_n_secs is not None:
            return self._last_time is None or time.monotonic() - self._last_time >= self._every_n_secs
        return False

    def before_run(self, run_context):
        self._should_log = self._due()
        return SessionRunArgs(self._fetch) if self._should_log else None

    def _log(self, values):
        if self._formatter is not None:
            print(self._formatter(values), flush=True)
        else:
            print(", ".join(f"{tag} = {values[tag]}" for tag in self._tags), flush=True)

    def after_run(self, run_context, run_values):
        if self._should_log:
            self._log(run_values.results)
            self._last_time = time.monotonic()
        self._iter += 1

    def end(self, session):
        if self._at_end:
            self._log(session.run(self._fetch))


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Fails (or, with fail_on_nan_loss=False, stops) the training when the
    loss becomes NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss, self._fail = loss_tensor, fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        import numpy as np
        if np.isnan(run_values.results):
            if self._fail:
                raise NanLossDuringTrainingError
            print("Model diverged with loss = NaN.", flush=True)
            run_context.request_stop()


class FinalOpsHook(SessionRunHook):
    """Runs `final_ops` when the session ends; their values are final_ops_values."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops, self._feed_dict = final_ops, final_ops_feed_dict
        self._values = None

    @property
    def final_ops_values(self):
        return self._values

    def end(self, session):
        if self._final_ops is not None:
            self._values = session.run(self._final_ops, feed_dict=self._feed_dict)


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint of the model to checkpoint_dir every save_secs
    seconds or save_steps global steps, once the session is created and
    at the end; listeners' before_save/after_save run around each save."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None):
        if (save_secs is None) == (save_steps is None):
            raise ValueError("exactly one of save_secs or save_steps should be provided")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._dir, self._secs, self._steps = checkpoint_dir, save_secs, save_steps
        self._saver, self._scaffold = saver, scaffold
        self._path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._listeners = list(listeners or [])
        self._last_step, self._last_time = None, None

    def begin(self):
        if get_global_step() is None:
            raise RuntimeError("Global step should be created to use CheckpointSaverHook.")
        if self._saver is None:
            scaffold_saver = getattr(self._scaffold, "saver", None) if self._scaffold is not None else None
            if scaffold_saver is None:
                from distflow.train.saver import Saver
                scaffold_saver = Saver(allow_empty=True)
            self._saver = scaffold_saver
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        self._save(session, session._global_step_value())

    def _save(self, session, step):
        for listener in self._listeners:
            listener.before_save(session, step)
        self._saver.save(session, self._path, global_step=step)
        self._last_step, self._last_time = step, time.monotonic()
        for listener in self._listeners:
            listener.after_save(session, step)

    def after_run(self, run_context, run_values):
        step = run_context.session._global_step_value()
        if self._steps is not None:
            due = step >= self._last_step + self._steps
        else:
            due = time.monotonic() - self._last_time >= self._secs
        if due and step != self._last_step:
            self._save(run_context.session, step)

    def end(self, session):
        step = session._global_step_value()
        if step != self._last_step:
            self._save(session, step)
        for listener in self._listeners:
            listener.end(session, step)


class CheckpointSaverListener:
    """Called around CheckpointSaverHook's saves."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class ProfilerHook(SessionRunHook):
    """Traces one step every save_steps global steps (or save_secs seconds)
    and writes its timeline to output_dir/timeline-<global step>.json, a
    Chrome trace (chrome://tracing, Perfetto) with every task's part of it."""

    def __init__(self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True, show_memory=False):
        if (save_steps is None) == (save_secs is None):
            raise ValueError("exactly one of save_steps and save_secs should be provided")
        self._steps, self._secs, self._dir = save_steps, save_secs, output_dir
        self._next_step, self._next_time = None, None
        self._tracing = False

    def begin(self):
        if get_global_step() is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")

    def before_run(self, run_context):
        step = run_context.session._global_step_value() + 1  # what this step will make it
        if self._steps is not None:
            self._tracing = self._next_step is None or step >= self._next_step
        else:
            self._tracing = self._next_time is None or time.monotonic() >= self._next_time
        if not self._tracing:
            return None
        return SessionRunArgs(None, options=_fw.RunOptions(trace_level=_fw.RunOptions.FULL_TRACE))

    def after_run(self, run_context, run_values):
        if not self._tracing:
            return
        step = run_context.session._global_step_value()
        if self._dir:
            os.makedirs(self._dir, exist_ok=True)
        path = os.path.join(self._dir, f"timeline-{step}.json")
        with open(path, "wb") as f:
            f.write(run_values.run_metadata.step_stats)
        self._next_step = step + (self._steps or 0)
        self._next_time = time.monotonic() + (self._secs or 0)
