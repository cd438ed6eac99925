"""tf.train.MonitoredTrainingSession: a Supervisor's session with hooks."""

from distflow import framework as _fw
from distflow.train import _sigterm
from distflow.train.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunValues
from distflow.train.supervisor import Supervisor, _MonitoredRunner, _merge_all_summaries
from distflow.train.sync_replicas import _SyncReplicasHook
from distflow.train.training_util import get_global_step


class _HookedSession(_MonitoredRunner):
    """What MonitoredTrainingSession returns: run, should_stop, close, and a
    context manager; every step runs the hooks' before_run and after_run,
    and their fetches and feeds join the caller's in that one step."""

    def __init__(self, monitored, graph, supervisor, hooks):
        super().__init__(monitored, graph, supervisor)
        self._hooks = list(hooks)
        self._closed = False
        # What hooks are handed: runs steps without the hooks, as TF's raw session.
        self._raw = _MonitoredRunner(monitored, graph, supervisor)
        for h in self._hooks:
            h.after_create_session(self._raw, None)
        # SIGTERM stops this session after its step (train/_sigterm.py); a
        # worker also looks, once a second, whether the chief asked it to.
        self._watching = _sigterm.install(self)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._raw)
        hook_fetches, feeds = [], dict(feed_dict or {})
        trace_level = getattr(options, "trace_level", 0) if options is not None else 0
        for h in self._hooks:
            args = h.before_run(context)
            hook_fetches.append(None if args is None else args.fetches)
            for key, value in ((args.feed_dict if args is not None else None) or {}).items():
                if key in feeds:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user. Conflict(s): {key}")
                feeds[key] = value
            if args is not None and args.options is not None:
                trace_level = max(trace_level, getattr(args.options, "trace_level", 0))
        if trace_level:  # a hook (ProfilerHook) or the caller traces this step
            options = _fw.RunOptions(trace_level=trace_level,
                                     timeout_in_ms=getattr(options, "timeout_in_ms", 0) if options else 0)
            run_metadata = run_metadata if run_metadata is not None else _fw.RunMetadata()
        has = [f is not None for f in hook_fetches]
        if any(has):
            outputs = super().run([fetches, [f for f in hook_fetches if f is not None]], feed_dict=feeds,
                                  options=options, run_metadata=run_metadata)
            results, extra = outputs[0], iter(outputs[1])
            hook_results = [next(extra) if h else None for h in has]
        else:
            results = super().run(fetches, feed_dict=feeds, options=options, run_metadata=run_metadata)
            hook_results = [None] * len(self._hooks)
        for h, r in zip(self._hooks, hook_results):
            h.after_run(context, SessionRunValues(results=r, options=options, run_metadata=run_metadata))
        if context.stop_requested:
            self._sv.request_stop()
        if self._watching and not self._sv._stopping:
            self._sv._look_for_a_stop()
        return results

    def request_stop(self):
        self._sv.request_stop()

    def raw_session(self):
        return self._raw

    def close(self, _error=False):
        if self._closed:
            return
        self._closed = True
        try:
            if not _error:
                for h in self._hooks:
                    h.end(self._raw)
        finally:
            try:
                self._sv.stop()
            finally:
                _sigterm.uninstall(self)

    def __exit__(self, exc_type, exc, tb):
        self.close(_error=exc_type is not None)
        return False


class Scaffold:
    """tf.train.Scaffold: the ops a monitored session initialises the model
    with. What is not given takes TF1's default when finalize() runs: init_op
    global_variables_initializer(), local_init_op
    group(local_variables_initializer(), tables_initializer()),
    summary_op merge_all(), saver a Saver()."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
                 copy_from_scaffold=None, local_init_feed_dict=None):
        if copy_from_scaffold is not None:
            c = copy_from_scaffold
            init_op = init_op or c.init_op
            init_fn = init_fn or c._init_fn
            local_init_op = local_init_op or c.local_init_op
            summary_op = summary_op or c.summary_op
            saver = saver or c.saver
            ready_op = ready_op or c.ready_op
            init_feed_dict = init_feed_dict if init_feed_dict is not None else c.init_feed_dict
            if local_init_feed_dict is None:
                local_init_feed_dict = c.local_init_feed_dict
        self._init_feed_dict = init_feed_dict
        self._local_init_feed_dict = local_init_feed_dict
        self._init_op, self._init_fn, self._local_init_op = init_op, init_fn, local_init_op
        self._ready_op, self._ready_for_local_init_op = ready_op, ready_for_local_init_op
        self._summary_op, self._saver = summary_op, saver
        self._finalized = False

    init_op = property(lambda self: self._init_op)
    init_fn = property(lambda self: self._init_fn)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    local_init_feed_dict = property(lambda self: self._local_init_feed_dict)
    local_init_op = property(lambda self: self._local_init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)

    def finalize(self):
        if self._finalized:
            return self
        g = _fw.get_default_graph()
        with g.as_default():
            if self._init_op is None:
                self._init_op = _fw.global_variables_initializer()
            if self._local_init_op is None:
                self._local_init_op = _fw.group(_fw.local_variables_initializer(), _fw.tables_initializer())
            if self._summary_op is None:
                from distflow.train.supervisor import _merge_all_summaries
                self._summary_op = _merge_all_summaries()
            if self._saver is None:
                from distflow.train.saver import Saver
                self._saver = Saver(allow_empty=True)
        g.finalize()
        self._finalized = True
        return self

    @staticmethod
    def default_local_init_op():
        return _fw.group(_fw.local_variables_initializer(), _fw.tables_initializer())


_USE_DEFAULT = object()


def _make_session(g, is_chief, checkpoint_dir, scaffold, hooks, save_checkpoint_secs, save_checkpoint_steps,
                  master, config, stop_grace_period_secs, summary=None):
    """summary: (summary_op, save_summaries_steps, save_summaries_secs,
    log_step_count_steps) for the chief's C++ monitored session to write."""
    scaffold = scaffold or Scaffold()
    sv = Supervisor(is_chief=is_chief, logdir=checkpoint_dir, global_step=get_global_step(g),
                    save_model_secs=save_checkpoint_secs or 0, graph=g,
                    # Without one, every variable's initialiser but the local ones' (which
                    # local_init_op runs, perhaps with local_init_feed_dict).
                    init_op=scaffold.init_op if scaffold.init_op is not None else (
                        _fw.global_variables_initializer() if g._local_variable_ops else Supervisor.USE_DEFAULT),
                    local_init_op=scaffold.local_init_op if scaffold.local_init_op is not None
                    else Supervisor.USE_DEFAULT,
                    init_fn=(lambda sess: scaffold.init_fn(scaffold, sess)) if scaffold.init_fn else None,
                    init_feed_dict=scaffold.init_feed_dict,
                    saver=scaffold.saver if scaffold.saver is not None else Supervisor.USE_DEFAULT,
                    summary_op=summary[0] if summary else None,
                    summary_writer=Supervisor.USE_DEFAULT if summary else None,
                    stop_grace_secs=stop_grace_period_secs)
    sv._save_steps = save_checkpoint_steps or 0
    sv._local_init_feed_dict = scaffold.local_init_feed_dict  # fed each time local_init_op runs
    if summary:
        sv._summary_schedule = summary[1:]
    sv._sync_hooks = [h for h in hooks if isinstance(h, _SyncReplicasHook)]
    hooks = [h for h in hooks if not isinstance(h, _SyncReplicasHook)]
    scaffold._sv_saver = sv.saver
    with g.as_default():
        for h in hooks:
            h.begin()  # before the session finalizes the graph: hooks may add ops
        # Ops that must run after every session creation, recoveries
        # included (hvd.BroadcastGlobalVariablesHook's broadcast), join
        # local_init_op, which the C++ session runs each time.
        extra = [h._local_init_op() for h in hooks if hasattr(h, "_local_init_op")]
        if extra:
            local = sv._local_init_op
            if local is None and g.get_collection(_fw.GraphKeys.LOCAL_VARIABLES):
                sv._local_vars = g.get_collection(_fw.GraphKeys.LOCAL_VARIABLES)
                local = _fw.local_variables_initializer()
            sv._local_init_op = _fw.group(*([local] if local is not None else []), *extra)
    runner = sv.prepare_or_wait_for_session(master, config, start_standard_services=False)
    session = _HookedSession(runner._monitored, g, sv, hooks)
    # As TF's session creators, the graph's queue runners start with the session.
    sv.start_queue_runners(runner)
    return session


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None, hooks=None,  # noqa: N802
                             chief_only_hooks=None, save_checkpoint_secs=_USE_DEFAULT,
                             save_summaries_steps=_USE_DEFAULT, save_summaries_secs=_USE_DEFAULT, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100, max_wait_secs=7200,
                             save_checkpoint_steps=_USE_DEFAULT, summary_dir=None):
    """tf.train.MonitoredTrainingSession: a Supervisor's session (restore or
    initialise, checkpoints, recovery) with hooks run around each step.
    As TF1, the chief with a checkpoint_dir saves a checkpoint every 600 s
    (save_checkpoint_secs) or save_checkpoint_steps steps, and writes
    summaries every 100 steps (save_summaries_steps) and global_step/sec
    every log_step_count_steps to summary_dir (default checkpoint_dir)."""
    if save_summaries_steps is _USE_DEFAULT and save_summaries_secs is _USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    save_summaries_steps = None if save_summaries_steps is _USE_DEFAULT else save_summaries_steps
    save_summaries_secs = None if save_summaries_secs is _USE_DEFAULT else save_summaries_secs
    if save_checkpoint_secs is _USE_DEFAULT and save_checkpoint_steps is _USE_DEFAULT:
        save_checkpoint_secs, save_checkpoint_steps = 600, None
    save_checkpoint_secs = None if save_checkpoint_secs is _USE_DEFAULT else save_checkpoint_secs
    save_checkpoint_steps = None if save_checkpoint_steps is _USE_DEFAULT else save_checkpoint_steps
    g = _fw.get_default_graph()
    all_hooks = list(hooks or []) + (list(chief_only_hooks or []) if is_chief else [])
    summary = None
    if is_chief and checkpoint_dir:
        if summary_dir not in (None, checkpoint_dir):
            raise NotImplementedError("MonitoredTrainingSession(summary_dir=...) other than checkpoint_dir")
        with g.as_default():
            summary_op = scaffold.summary_op if scaffold is not None and scaffold.summary_op is not None \
                else _merge_all_summaries()
        # As TF1's SummarySaverHook and StepCounterHook, run by the chief's
        # C++ monitored session.
        summary = (summary_op, save_summaries_steps or 0, save_summaries_secs or 0, log_step_count_steps or 0)
    return _make_session(g, is_chief, checkpoint_dir, scaffold, all_hooks, save_checkpoint_secs,
                         save_checkpoint_steps, master, config, stop_grace_period_secs, summary)


class ChiefSessionCreator:
    """Makes the chief's session: restore checkpoint_dir's newest checkpoint or initialise."""

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
                 checkpoint_filename_with_path=None):
        if checkpoint_filename_with_path is not None:
            raise NotImplementedError("ChiefSessionCreator(checkpoint_filename_with_path=...): give checkpoint_dir")
        self.scaffold, self.master, self.config, self.checkpoint_dir = scaffold, master, config, checkpoint_dir
        self.is_chief = True


class WorkerSessionCreator:
    """Makes a non-chief's session: wait until the chief initialised the model."""

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        self.scaffold, self.master, self.config, self.checkpoint_dir = scaffold, master, config, None
        self.is_chief = False


def MonitoredSession(session_creator=None, hooks=None, stop_grace_period_secs=120):  # noqa: N802
    """tf.train.MonitoredSession: a session made by session_creator
    (ChiefSessionCreator by default) with hooks; it restores from the
    creator's checkpoint_dir but saves only through a CheckpointSaverHook."""
    creator = session_creator or ChiefSessionCreator()
    g = _fw.get_default_graph()
    return _make_session(g, creator.is_chief, creator.checkpoint_dir, creator.scaffold, list(hooks or []), 0, 0,
                         creator.master, creator.config, stop_grace_period_secs)


def SingularMonitoredSession(hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None,  # noqa: N802
                             stop_grace_period_secs=120, checkpoint_filename_with_path=None):
    """tf.train.SingularMonitoredSession: a chief's MonitoredSession; raw_session() steps without hooks."""
    creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir, checkpoint_filename_with_path)
    return MonitoredSession(creator, hooks, stop_grace_period_secs)
