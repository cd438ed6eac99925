"""The hooks that write summaries from a MonitoredTrainingSession, as
TensorFlow 1.x's: SummarySaverHook (a summary op's value every N steps or
seconds) and StepCounterHook ("global_step/sec"). Both write through a
FileWriter (the one given, or FileWriterCache's for output_dir) at the
global step, and follow the SessionRunHook protocol of distflow.train."""
import time

from distflow import train as _train
from distflow.summary import FileWriterCache, SessionLog, Summary


class SecondOrStepTimer:
    """Triggers every `every_secs` seconds or every `every_steps` steps
    (exactly one of them), the first time always."""

    def __init__(self, every_secs=None, every_steps=None):
        if (every_secs is None) == (every_steps is None):
            raise ValueError("Exactly one of every_secs and every_steps must be provided.")
        if every_steps is not None and int(every_steps) < 1:
            raise ValueError(f"every_steps must be positive, got {every_steps}")
        self._every_secs, self._every_steps = every_secs, every_steps
        self.reset()

    def reset(self):
        self._last_time, self._last_step = None, None

    def should_trigger_for_step(self, step):
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step):
        """(seconds, steps) since the last trigger, (None, None) the first time."""
        now = time.time()
        elapsed = (None, None) if self._last_time is None else (now - self._last_time, step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self):
        return self._last_step


def _global_step_or_fail(hook):
    step = _train.get_global_step()
    if step is None:
        raise RuntimeError(f"Global step should be created to use {hook}.")
    return step


class SummarySaverHook(_train.SessionRunHook):
    """Runs summary_op (or scaffold.summary_op) with the step every
    save_steps steps or save_secs seconds and writes its value at the global
    step; a SessionLog START first."""

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None, scaffold=None,
                 summary_op=None):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op, self._scaffold = summary_op, scaffold
        self._summary_writer, self._output_dir = summary_writer, output_dir
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step = _global_step_or_fail("SummarySaverHook")

    def _get_summary_op(self):
        op = self._summary_op if self._summary_op is not None else getattr(self._scaffold, "summary_op", None)
        if op is None:
            return None
        return op if isinstance(op, list) else [op]

    def before_run(self, run_context):
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(self._next_step)
        requests = {"global_step": self._global_step}
        if self._request_summary and self._get_summary_op() is not None:
            requests["summary"] = self._get_summary_op()
        return _train.SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step))
        if self._next_step is None:
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", []):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()


class StepCounterHook(_train.SessionRunHook):
    """Writes the training speed, "<global step's name>/sec" (usually
    "global_step/sec"), every every_n_steps steps or every_n_secs seconds,
    and prints it."""

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer, self._output_dir = summary_writer, output_dir

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._global_step = _global_step_or_fail("StepCounter")
        self._summary_tag = self._global_step.op.name + "/sec"

    def after_create_session(self, session, coord):
        self._timer.reset()

    def before_run(self, run_context):
        return _train.SessionRunArgs(self._global_step)

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
        steps_per_sec = elapsed_steps / elapsed_time if elapsed_time > 0 else 0.0
        if self._summary_writer is not None:
            summary = Summary(value=[Summary.Value(tag=self._summary_tag, simple_value=steps_per_sec)])
            self._summary_writer.add_summary(summary, global_step)
        print(f"{self._summary_tag}: {steps_per_sec:g}", flush=True)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results)
        if self._timer.should_trigger_for_step(stale + 1):
            global_step = int(run_context.session.run(self._global_step))
            if self._timer.should_trigger_for_step(global_step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
                if elapsed_time is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
