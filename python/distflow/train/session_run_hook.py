"""The hook protocol of monitored sessions: SessionRunHook and its arguments."""
import collections


class SessionRunArgs(collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook's before_run adds to the step: more fetches and feeds."""

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunValues(collections.namedtuple("SessionRunValues", ["results", "options", "run_metadata"])):
    """What a hook's after_run is given: the values of its own fetches."""


class SessionRunContext:
    """The step a hook is called around: the caller's arguments, the session,
    and request_stop()."""

    def __init__(self, original_args, session):
        self._original_args, self._session, self._stop_requested = original_args, session, False

    original_args = property(lambda self: self._original_args)
    session = property(lambda self: self._session)
    stop_requested = property(lambda self: self._stop_requested)

    def request_stop(self):
        self._stop_requested = True


class SessionRunHook:
    """tf.train.SessionRunHook: begin() before the graph is finalized,
    after_create_session(session, coord), before_run(run_context) (may return
    SessionRunArgs), after_run(run_context, run_values) around every step,
    end(session) when the session closes without an error."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass
