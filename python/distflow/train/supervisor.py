"""tf.train.Supervisor over distflow's C++ MonitoredSession."""
import contextlib
import os
import sys
import time
import types

from distflow import _distflow
from distflow import framework as _fw
from distflow.train import _sigterm
from distflow.train.server import _servers_by_target, _servers_by_target_of_task


def _merge_all_summaries():
    """The graph's summaries merged (tf.summary.merge_all), or None."""
    try:
        from distflow import summary
    except ImportError:  # a package without summaries
        return None
    return summary.merge_all()


def _save_slices(graph):
    from distflow.train.saver import save_slices  # saver.py imports this module
    return save_slices(graph)


def _feed_pairs(graph, feed_dict, what="init_feed_dict"):
    """init_feed_dict (or local_init_feed_dict: `what`) as (output, value)
    pairs, each value checked against its tensor's dtype as Session.run
    checks a feed."""
    pairs = []
    for key, value in (feed_dict or {}).items():
        t = key
        if isinstance(key, str):
            try:
                t = graph.as_graph_element(key, allow_operation=False)
            except (KeyError, ValueError, TypeError) as e:
                raise ValueError(f"{what}: {key!r} names no tensor of the graph ({e})") from None
        if not isinstance(t, _fw.Tensor):
            raise TypeError(f"{what}: key {key!r} is not a Tensor of the graph (a tf.placeholder, or its "
                            f"name such as 'x:0')")
        pairs.append((t._out, _fw.Session._feed_value(t, value)))
    return pairs


class Supervisor:
    """tf.train.Supervisor over distflow's MonitoredSession: the chief
    restores the newest checkpoint of `logdir` or runs `init_op`, the other
    workers wait for it; the chief saves checkpoints every
    `save_model_secs` and at the end; a failed task is recovered from.

    Unlike TensorFlow's, it also ends the cluster: when the session of a
    task of a ps/worker cluster ends, the task counts itself done (in a
    variable on ps 0), and the chief, once every worker is done, shuts the
    cluster down, so the parameter servers' server.join() returns."""

    USE_DEFAULT = 0  # tf.train.Supervisor.USE_DEFAULT

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT, is_chief=True,
                 init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, logdir=None,
                 summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs=120,
                 save_model_secs=600, recovery_wait_secs=30, stop_grace_secs=120, checkpoint_basename="model.ckpt",
                 session_manager=None, summary_writer=USE_DEFAULT, init_fn=None, local_init_run_options=None):
        if session_manager is not None:
            raise NotImplementedError("Supervisor(session_manager=...)")
        U = Supervisor.USE_DEFAULT
        self._graph = graph or _fw.get_default_graph()
        self.is_chief = is_chief
        self._logdir = logdir or ""
        g = self._graph
        with g.as_default():
            if global_step is U:
                from distflow.train.training_util import get_global_step
                global_step = get_global_step(g)
            self._global_step = global_step
            self._init_op = None if init_op is U else init_op
            local_vars = g.get_collection(_fw.GraphKeys.LOCAL_VARIABLES)
            if local_init_op is U:
                local_init_op = (_fw.group(_fw.local_variables_initializer(), _fw.tables_initializer())
                                 if local_vars or g.get_collection(_fw.GraphKeys.TABLE_INITIALIZERS) else None)
            self._local_init_op = local_init_op
            self._local_vars = local_vars
            # ready_op and ready_for_local_init_op: distflow's readiness check
            # is built in (every model variable initialised, checked beside it).
            self._ready_op = None if ready_op in (U, None) else ready_op
            if saver is U:
                from distflow.train.saver import Saver
                saver = Saver(allow_empty=True)
            self._saver = saver
            if self._logdir and global_step is None and saver is not None:
                # distflow's checkpoints are numbered by the global step.
                from distflow.train.training_util import get_or_create_global_step
                self._global_step = get_or_create_global_step(g)
            if summary_op is U:
                summary_op = _merge_all_summaries()
            self._summary_op = summary_op
        self._init_fn = init_fn
        self._init_feed_dict = init_feed_dict
        self._summary_writer_arg = summary_writer
        self._summary_writer = None
        self._save_summaries_secs = save_summaries_secs
        self._save_secs = int(save_model_secs or 0)
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._checkpoint_basename = checkpoint_basename
        self._session = None
        self._runner = None
        self._stopped = False
        # (counter, increment, workers, cluster, task, stop flag, set it) on ps 0, made once the cluster is known
        self._done = None
        self._told_to_stop = False  # SIGTERM (train/_sigterm.py)
        self._sync_hooks = []  # (SyncReplicasOptimizer, is_chief) from MonitoredTrainingSession
        self._threads = []
        self._coord = None
        # SIGTERM (train/_sigterm.py) under managed_session or a monitored session:
        self._watching_sigterm = False
        self._stopping = False  # acting on a SIGTERM or the chief's stop flag
        self._last_look = 0.0
        self._last_step = None  # (feeds, outputs, targets) of the last step, for the chief's extra sync steps

    # TF1's read-only attributes.
    init_op = property(lambda self: self._init_op)
    local_init_op = property(lambda self: self._local_init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: None)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)
    session_manager = property(lambda self: None)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    save_model_secs = property(lambda self: self._save_secs)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    save_path = property(lambda self: os.path.join(self._logdir, self._checkpoint_basename) if self._logdir
                         else None)

    @property
    def coord(self):
        if self._coord is None:
            from distflow.train.coordinator import Coordinator
            self._coord = Coordinator()
        return self._coord

    @property
    def summary_writer(self):
        """The FileWriter of logdir (the chief's), made on first use."""
        if self._summary_writer is None and self._summary_writer_arg is not None and self.is_chief and self._logdir:
            if self._summary_writer_arg is Supervisor.USE_DEFAULT:
                try:
                    from distflow.summary import FileWriter
                except ImportError:  # a package without summaries
                    return None
                self._summary_writer = FileWriter(self._logdir)
            else:
                self._summary_writer = self._summary_writer_arg
        return self._summary_writer

    def summary_computed(self, sess, summary, global_step=None):
        """Writes a summary that the program computed to logdir's events file."""
        if self.summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer (a chief Supervisor with a logdir).")
        if global_step is None and self._global_step is not None:
            global_step = sess._global_step_value() if hasattr(sess, "_global_step_value") else \
                int(sess.run(self._global_step))
        self.summary_writer.add_summary(summary, global_step)

    def start_queue_runners(self, sess, queue_runners=None):
        """Starts the graph's queue runners (GraphKeys.QUEUE_RUNNERS) with the
        Supervisor's coordinator; stop() closes their queues and joins them."""
        qrs = queue_runners if queue_runners is not None else \
            self._graph.get_collection(_fw.GraphKeys.QUEUE_RUNNERS)
        threads = []
        for qr in qrs:
            threads.extend(qr.create_threads(sess, coord=self.coord, daemon=True, start=True))
        self._threads.extend(threads)
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Calls target(*args) every timer_interval_secs in a thread until stop()."""
        from distflow.train.coordinator import LooperThread
        t = LooperThread.loop(self.coord, timer_interval_secs, target, args, kwargs)
        self._threads.append(t)
        return t

    def start_standard_services(self, sess):
        """TF1's standard services: checkpoints and summaries, which the
        chief's C++ monitored session already runs (no extra thread), and
        the graph's queue runners."""
        return self.start_queue_runners(sess)

    @property
    def global_step(self):
        return self._global_step

    def should_stop(self):
        if self._watching_sigterm and not self._stopping:
            self._look_for_a_stop()
        return (self._stopped or (self._coord is not None and self._coord.should_stop())
                or (self._session is not None and self._session.should_stop()))

    def _look_for_a_stop(self):
        """After a step: a SIGTERM stops this task after it (the chief also
        asks every worker to stop after theirs); a worker also looks whether
        the chief asked it to (after every step in synchronous training,
        where its next step would wait for the chief's tokens, else once a
        second)."""
        if _sigterm.received():
            self._stopping = True
            self._told_to_stop = True
            everyone = self.is_chief and self._stop_the_job()
            print("distflow: SIGTERM: stopping after this step" + (", and every worker after its own" if everyone
                                                                   else ""), file=sys.stderr, flush=True)
            self.request_stop()
        elif not self.is_chief and (self._sync_hooks or time.monotonic() - self._last_look >= 1.0):
            self._last_look = time.monotonic()
            if self._job_asked_to_stop():
                self._stopping = True
                print("distflow: the chief asked every worker to stop; stopping after this step", file=sys.stderr,
                      flush=True)
                self.request_stop()

    def _finish_sync_steps(self):
        """A chief of synchronous training told to stop: workers may already
        wait in a step for its gradient and tokens, so it runs its last step
        again, up to 3 times, each bounded to 5 s (one that times out is
        needed by nobody)."""
        if not (self._told_to_stop and self.is_chief and self._sync_hooks and self._last_step is not None):
            return
        feeds, outputs, targets = self._last_step
        for _ in range(3):
            try:
                self._session.run(feeds, outputs, targets, False, 5000)
            except _distflow.Error:
                break

    def request_stop(self, ex=None):
        self._stopped = True
        if self._coord is not None:
            self._coord.request_stop(ex)

    def _cluster_counter(self, server):
        """The done-counter of a ps/worker cluster, added before the graph is finalized."""
        cluster = server.cluster
        if "ps" not in cluster or "worker" not in cluster:
            return None
        g = self._graph
        saved = (g._device_stack, g._name_stack, g._control_stack)
        g._device_stack, g._name_stack, g._control_stack = ["/job:ps/task:0"], [], []
        try:
            with g.as_default():
                counter = _fw.Variable(_fw.constant(0, dtype=_fw._dtypes.int32), trainable=False,
                                       name="supervisor_workers_done")
                inc = counter.assign_add(1)
                # Set by a chief told to stop (SIGTERM): every worker stops after its step.
                stop = _fw.Variable(_fw.constant(0, dtype=_fw._dtypes.int32), trainable=False,
                                    name="supervisor_stop_requested")
                set_stop = stop.assign(1)
        finally:
            g._device_stack, g._name_stack, g._control_stack = saved
        return counter, inc, len(cluster["worker"]), cluster, server.task_name, stop, set_stop

    def prepare_or_wait_for_session(self, master="", config=None, wait_for_checkpoint=False, max_wait_secs=7200,
                                    start_standard_services=True):
        """The chief restores logdir's newest checkpoint or runs init_op (then
        init_fn); the others wait until the model is ready; every task then
        runs local_init_op. Returns the session the program steps."""
        master, options = _fw._session_target(master, (config or _fw.ConfigProto())._options())
        server = _servers_by_target.get(master)
        if server is not None and self._done is None:
            self._done = self._cluster_counter(server)
        coordination = [self._done[0]._out, self._done[5]._out] if self._done else []
        init_op = self._init_op
        if init_op is not None and self._done is not None:
            with self._graph.as_default():  # the counter is newer than the program's init_op
                init_op = _fw.group(init_op, self._done[0].initializer, self._done[5].initializer)
        if self._local_init_op is None and self._graph.get_collection(_fw.GraphKeys.LOCAL_VARIABLES):
            with self._graph.as_default():  # local variables made after the Supervisor
                self._local_vars = self._graph.get_collection(_fw.GraphKeys.LOCAL_VARIABLES)
                self._local_init_op = _fw.local_variables_initializer()
        self._graph.finalize()
        local_init = self._local_init_op
        # The chief's summaries are written by the C++ monitored session into
        # logdir's events file: summary_op with the step's own feeds every
        # save_summaries_secs (or, under MonitoredTrainingSession,
        # save_summaries_steps), global_step/sec, and the graph first.
        summary_op = self._summary_op if self._summary_writer_arg is not None else None
        summary_steps, summary_secs, step_count_steps = getattr(self, "_summary_schedule", (
            0, self._save_summaries_secs if summary_op is not None else 0,
            100 if self._summary_writer_arg is not None else 0))
        if not self._sync_hooks:  # a TF1 sync program under a Supervisor: no hook was handed over
            self._sync_hooks = [types.SimpleNamespace(_sync=opt, _is_chief=self.is_chief)
                                for opt in getattr(self._graph, "_sync_replicas_optimizers", [])]
        self._session = _distflow.MonitoredSession(
            self._graph._root, master, self.is_chief, self._logdir if self._saver is not None else "",
            None if self._global_step is None else self._global_step._out,
            None if init_op is None else init_op._op, self._save_secs, coordination, options,
            [(h._sync._opt, h._is_chief) for h in self._sync_hooks],
            [v._out for v in self._local_vars],
            None if local_init is None else _fw._as_cc_operation(local_init),
            int(getattr(self, "_save_steps", 0) or 0), 5,
            summary_op._out if isinstance(summary_op, _fw.Tensor) else None,
            int(summary_steps or 0), int(summary_secs or 0), int(step_count_steps or 0),
            _feed_pairs(self._graph, self._init_feed_dict),
            _feed_pairs(self._graph, getattr(self, "_local_init_feed_dict", None), "local_init_feed_dict"),
            _save_slices(self._graph))
        self._runner = _MonitoredRunner(self._session, self._graph, self)
        if self.is_chief and self._init_fn is not None and not self._session.restored_from:
            self._init_fn(self._runner)
        if start_standard_services:
            self.start_standard_services(self._runner)
        return self._runner

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True, close_summary_writer=True):
        """The session of prepare_or_wait_for_session, stopped on exit. While
        it is open a SIGTERM (train/_sigterm.py) makes should_stop() true
        after the step in progress: the program's loop ends, the chief saves
        its last checkpoint, and the job ends as under
        MonitoredTrainingSession."""
        sess = self.prepare_or_wait_for_session(master, config, start_standard_services=start_standard_services)
        self._watching_sigterm = _sigterm.install(self)
        try:
            yield sess
        except Exception as e:  # noqa: B902 (reported to the threads, then raised, as TF)
            self.request_stop(e)
            raise
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                self._watching_sigterm = False
                _sigterm.uninstall(self)

    def wait_for_stop(self):
        self.coord.wait_for_stop()

    def _end(self):
        if self._session is None:
            return
        self._finish_sync_steps()
        session, self._session = self._session, None
        done = self._done
        if done is not None:
            counter, inc, num_workers, cluster, task = done[:5]
            session.run_raw([], [], [inc._out.op])
        session.close()
        if done is not None and self.is_chief:
            if self._told_to_stop:  # the workers leave after their step: a short wait
                self._shut_down_when_done(counter, num_workers, cluster, task,
                                          wait_secs=max(1, min(600, self._stop_grace_secs / 2)),
                                          reason="the chief was told to stop (SIGTERM)")
            else:
                self._shut_down_when_done(counter, num_workers, cluster, task)

    def _stop_the_job(self):
        """The chief was told to stop: sets the flag every worker reads (False without one)."""
        if self._session is None or self._done is None:
            return False
        self._session.run_raw([], [], [self._done[6]._out.op])
        return True

    def _job_asked_to_stop(self):
        """Whether the chief asked every worker to stop (False without the flag)."""
        if self._session is None or self._done is None:
            return False
        return int(self._session.run_raw([], [self._done[5]._out], [])[0]) != 0

    def _shut_down_when_done(self, counter, num_workers, cluster, task, wait_secs=600, reason="training is over"):
        # Only the ps holding the counter and this task: workers that are
        # done may have exited already.
        check = _distflow.Session(_servers_by_target_of_task(task),
                                  {"device_filters": ["/job:ps/task:0", task]})
        deadline = time.monotonic() + wait_secs
        done = 0
        # Workers that joined the running job (distflow.elastic) count too,
        # as the coordinator on ps 0 knows them; once declared dead they are
        # not waited for.
        coordinator = (cluster.get("ps") or {}).get(0)
        joined, gone = set(), set()
        try:
            while time.monotonic() < deadline:
                done = int(check.run([], [counter._out], [], 0)[0])
                if coordinator is not None:
                    try:
                        members = _distflow.list_cluster_members(coordinator)
                    except (_distflow.UnavailableError, _distflow.DeadlineExceededError,
                            _distflow.FailedPreconditionError):
                        members = []  # no coordinator to ask: the spec's workers
                    for task, _, state, was_joined in members:
                        if was_joined and task.startswith("/job:worker/"):
                            joined.add(task)
                            if state == "DEAD":
                                gone.add(task)
                if done >= num_workers + len(joined - gone):
                    break
                time.sleep(0.5)
        finally:
            check.close()
        num_workers += len(joined - gone)
        if joined:
            print(f"Supervisor: {len(joined)} worker(s) joined the running job"
                  + (f", {len(gone)} of them declared dead" if gone else ""), file=sys.stderr)
        print(f"Supervisor: {done} of {num_workers} workers done; shutting the cluster down", file=sys.stderr)
        try:
            _distflow.shutdown_cluster(cluster, reason, [task])
        except (_distflow.CancelledError, _distflow.UnavailableError) as e:
            # A worker that counted itself done may be exiting as it is asked
            # to stop; only a task that must be told (a ps) failing matters.
            if "/job:ps/" in str(e) or done < num_workers:
                raise
            print(f"Supervisor: a finished worker was already stopping: {e}", file=sys.stderr)

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        """Stops the services and joins `threads`, then ends the session
        (the chief's last checkpoint; counting this task done)."""
        self._stopped = True
        if self._coord is not None or self._threads or threads:
            self.coord.request_stop()
            try:
                self.coord.join(list(self._threads) + list(threads or []),
                                stop_grace_period_secs=self._stop_grace_secs,
                                ignore_live_threads=ignore_live_threads)
            finally:
                self._threads = []
                self._end()
                self._close_writer(close_summary_writer)
            return
        self._end()
        self._close_writer(close_summary_writer)

    def _close_writer(self, close):
        if close and self._summary_writer is not None:
            self._summary_writer.close()

    def stop_on_exception(self):
        """A context manager that requests a stop when its body raises
        (the Coordinator's)."""
        return self.coord.stop_on_exception()

    # TF1's CamelCase aliases.
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


class _MonitoredRunner(_fw.Session):
    """What managed_session yields: Session.run's fetch and feed handling,
    steps run by the monitored session."""

    def __init__(self, monitored, graph, supervisor):  # noqa: super-init-not-called
        self.graph = graph
        self._monitored = monitored
        self._sv = supervisor
        self._sess = self  # Session.run calls self._sess.run(feeds, outputs, targets, timeout)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        return _fw.Session.run(self, fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)

    def _global_step_value(self):
        """The global step after the last step (or at creation), as the
        monitored session fetched it; -1 without one."""
        return self._monitored.global_step

    def _run_raw(self, feeds, outputs, targets, timeout, trace=False):
        if not self._sv._stopping:  # a training step (after a stop: the program's evaluation, say)
            self._sv._last_step = (feeds, outputs, targets)
        return self._monitored.run(feeds, outputs, targets, trace)

    def should_stop(self):
        return self._sv.should_stop()

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
