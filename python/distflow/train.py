"""tf.train: cluster specs, servers, the replica device setter, optimizers
and the Supervisor."""
import collections
import contextlib
import sys
import time

from distflow import _distflow
from distflow import framework as _fw


class ClusterSpec:
    """tf.train.ClusterSpec({"ps": ["host:2222"], "worker": [...]}) (or a
    {job: {index: address}} dict, or another ClusterSpec). Checked in C++:
    a bad address, job name or index is an InvalidArgumentError naming it."""

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._jobs = dict(cluster._jobs)
        elif isinstance(cluster, dict):
            self._jobs = _distflow.cluster_spec(cluster)
        else:
            raise TypeError(f"ClusterSpec takes a dict of job -> addresses, not {type(cluster).__name__}")

    def as_dict(self):
        out = {}
        for job, tasks in self._jobs.items():
            indices = sorted(tasks)
            out[job] = [tasks[i] for i in indices] if indices == list(range(len(indices))) else dict(tasks)
        return out

    @property
    def jobs(self):
        return sorted(self._jobs)

    def num_tasks(self, job_name):
        return len(self._jobs[job_name])

    def task_indices(self, job_name):
        return sorted(self._jobs[job_name])

    def task_address(self, job_name, task_index):
        return self._jobs[job_name][task_index]

    def job_tasks(self, job_name):
        tasks = self._jobs[job_name]
        return [tasks.get(i) for i in range(max(tasks) + 1)] if tasks else []

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __repr__(self):
        return f"ClusterSpec({self.as_dict()})"


class Server:
    """tf.train.Server(cluster, job_name, task_index): this task of the
    cluster, serving on its address; join() returns once the cluster is shut
    down (the chief's end of training) or stop() is called."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None, config=None,
                 start=True):
        if protocol not in (None, "grpc"):
            raise ValueError(f"protocol must be 'grpc', not {protocol!r}")
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("job_name must be given when the cluster has several jobs")
            job_name = cluster.jobs[0]
        if task_index is None:
            if cluster.num_tasks(job_name) != 1:
                raise ValueError(f"task_index must be given: job '{job_name}' has several tasks")
            task_index = cluster.task_indices(job_name)[0]
        self._server = _distflow.Server(cluster._jobs, job_name, int(task_index))
        self._joined = False
        if start:
            self.start()
        _servers_by_target[self.target] = self._server

    def start(self):
        self._server.start()

    def join(self):
        self._server.join()
        self._joined = True

    def stop(self):
        self._server.stop()

    @property
    def target(self):
        return self._server.target

    @property
    def server_def(self):
        raise NotImplementedError("tf.train.Server.server_def is not supported by distflow")

    @staticmethod
    def create_local_server(config=None, start=True):
        # As TensorFlow: one task of job "local" on a free port.
        cluster = _distflow.local_cluster_spec(0, 1)
        return Server({"local": [cluster["worker"][0]]}, "local", 0, start=start)


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker", merge_devices=True,
                          cluster=None, ps_ops=None, ps_strategy=None):
    """Variables round-robin over the ps tasks of `cluster`, everything else
    on `worker_device`; None when the cluster has no ps job (as TensorFlow)."""
    if ps_strategy is not None or ps_ops is not None:
        raise NotImplementedError("replica_device_setter: ps_strategy and ps_ops are not supported yet")
    if cluster is None:
        if ps_tasks == 0:
            return None
        raise NotImplementedError("replica_device_setter without cluster= is not supported yet")
    spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
    ps_job = ps_device.split("/job:")[1].split("/")[0] if "/job:" in ps_device else "ps"
    if ps_job not in spec.jobs:
        return None
    return _distflow.replica_device_setter(spec._jobs, worker_device, ps_job)


# ---- optimizers -----------------------------------------------------------------

class Optimizer:
    """An optimizer made in C++ (train/optimizer.h); minimize() adds the
    gradients and the updates to the default graph, each update on its
    variable's device, and increments global_step (int or float) if given."""

    _kind = None

    def __init__(self, **hyper):
        self._hyper = hyper
        self._opt = _distflow.Optimizer.create(self._kind, hyper)

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        if var_list is not None:
            return self.apply_gradients(self.compute_gradients(loss, var_list=var_list), global_step, name)
        g = _fw.get_default_graph()
        op = self._opt.minimize(g._scope(), _fw.convert_to_tensor(loss)._out,
                                None if global_step is None else global_step._out)
        return _fw.Operation(op, g)

    def compute_gradients(self, loss, var_list=None):
        g = _fw.get_default_graph()
        pairs = self._opt.compute_gradients(g._scope(), _fw.convert_to_tensor(loss)._out)
        out = [(_fw.Tensor(gr, g), _fw.Tensor(v, g)) for gr, v in pairs]
        if var_list is not None:
            names = {v.name for v in var_list}
            out = [(gr, v) for gr, v in out if v.name in names]
        return out

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        g = _fw.get_default_graph()
        op = self._opt.apply_gradients(g._scope(), [(gr._out, v._out) for gr, v in grads_and_vars],
                                       None if global_step is None else global_step._out)
        return _fw.Operation(op, g)


class GradientDescentOptimizer(Optimizer):
    _kind = "GradientDescent"

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate=learning_rate)


class MomentumOptimizer(Optimizer):
    _kind = "Momentum"

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate=learning_rate, momentum=momentum, use_nesterov=use_nesterov)


class AdagradOptimizer(Optimizer):
    _kind = "Adagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        super().__init__(learning_rate=learning_rate, initial_accumulator_value=initial_accumulator_value)


class RMSPropOptimizer(Optimizer):
    _kind = "RMSProp"

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, name="RMSProp"):
        if centered:
            raise NotImplementedError("RMSPropOptimizer(centered=True)")
        super().__init__(learning_rate=learning_rate, decay=decay, momentum=momentum, epsilon=epsilon)


class AdamOptimizer(Optimizer):
    _kind = "Adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False,
                 name="Adam"):
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon)


class SyncReplicasOptimizer(Optimizer):
    """tf.train.SyncReplicasOptimizer: synchronous between-graph training
    (distflow/train/sync_replicas_optimizer.h). Each step averages
    `replicas_to_aggregate` gradients, one per worker, and applies them once
    with `opt`; with more workers (`total_num_replicas`) the slowest of a
    step are backups whose gradients are dropped. Every worker passes
    make_session_run_hook(is_chief) to MonitoredTrainingSession.

    distflow names each worker's gradients by its replica: `replica_id`
    (TensorFlow has no such argument) defaults to the task index of this
    process's tf.train.Server of job "worker"."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None, variable_averages=None,
                 variables_to_average=None, use_locking=False, name="sync_replicas", replica_id=None,
                 step_timeout_secs=120):
        if variable_averages is not None or variables_to_average is not None:
            raise NotImplementedError("tf.train.SyncReplicasOptimizer(variable_averages=...)")
        if not isinstance(opt, Optimizer) or isinstance(opt, SyncReplicasOptimizer):
            raise TypeError(f"SyncReplicasOptimizer wraps one of distflow's optimizers, not {type(opt).__name__}")
        if replica_id is None:
            replica_id = _local_worker_index()
        self._wrapped = opt
        self._opt = _distflow.SyncReplicasOptimizer.create(opt._kind, opt._hyper, int(replicas_to_aggregate),
                                                           int(total_num_replicas or 0), int(replica_id),
                                                           float(step_timeout_secs))

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer.minimize needs global_step: it counts the synchronous steps")
        return super().minimize(loss, global_step=global_step, var_list=var_list, name=name)

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """The hook every worker gives its MonitoredTrainingSession; the
        chief's applies the averaged gradients."""
        return _SyncReplicasHook(self, bool(is_chief))

    @property
    def steps_applied(self):
        """Steps the chief's hook has applied (0 on the other workers)."""
        return self._opt.steps_applied

    @property
    def stale_gradients_dropped(self):
        return self._opt.stale_gradients_dropped


def _local_worker_index():
    workers = [s.task_name for s in _servers_by_target.values() if s.task_name.startswith("/job:worker/")]
    if len(workers) != 1:
        raise ValueError("SyncReplicasOptimizer: this process has " +
                         ("no tf.train.Server of job 'worker'" if not workers else f"several worker servers {workers}")
                         + ", so its replica is unknown; pass replica_id=<this worker's task index>")
    return int(workers[0].rsplit(":", 1)[1])


# ---- Supervisor ------------------------------------------------------------------

class Supervisor:
    """tf.train.Supervisor over distflow's MonitoredSession: the chief
    restores the newest checkpoint of `logdir` or runs `init_op`, the other
    workers wait for it; the chief saves checkpoints every
    `save_model_secs` and at the end; a failed task is recovered from.

    Unlike TensorFlow's, it also ends the cluster: when the session of a
    task of a ps/worker cluster ends, the task counts itself done (in a
    variable on ps 0), and the chief, once every worker is done, shuts the
    cluster down, so the parameter servers' server.join() returns."""

    def __init__(self, is_chief=True, logdir=None, init_op=None, summary_op=None, saver=None,
                 global_step=None, save_model_secs=600, graph=None, ready_op=None, recovery_wait_secs=30,
                 summary_writer=None, save_summaries_secs=120, init_feed_dict=None, local_init_op=None,
                 stop_grace_secs=120, checkpoint_basename="model.ckpt", session_manager=None, init_fn=None):
        if init_feed_dict is not None or init_fn is not None or local_init_op is not None:
            raise NotImplementedError("Supervisor: init_feed_dict, init_fn and local_init_op are not supported")
        self._graph = graph or _fw.get_default_graph()
        self.is_chief = is_chief
        self._logdir = logdir or ""
        self._init_op = init_op
        self._global_step = global_step
        self._save_secs = int(save_model_secs or 0)
        self._session = None
        self._stopped = False
        self._done = None  # (counter, increment) on ps 0, made once the cluster is known
        self._sync_hooks = []  # (SyncReplicasOptimizer, is_chief) from MonitoredTrainingSession

    @property
    def global_step(self):
        return self._global_step

    def should_stop(self):
        return self._stopped or (self._session is not None and self._session.should_stop())

    def request_stop(self, ex=None):
        self._stopped = True

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
        finally:
            g._device_stack, g._name_stack, g._control_stack = saved
        return counter, inc, len(cluster["worker"]), cluster, server.task_name

    def prepare_or_wait_for_session(self, master="", config=None, **unused):
        server = _servers_by_target.get(master)
        if server is not None and self._done is None:
            self._done = self._cluster_counter(server)
        coordination = [self._done[0]._out] if self._done else []
        init_op = self._init_op
        if init_op is not None and self._done is not None:
            with self._graph.as_default():  # the counter is newer than the program's init_op
                init_op = _fw.group(init_op, self._done[0].initializer)
        self._graph.finalize()
        options = (config or _fw.ConfigProto())._options()
        self._session = _distflow.MonitoredSession(
            self._graph._root, master, self.is_chief, self._logdir,
            None if self._global_step is None else self._global_step._out,
            None if init_op is None else init_op._op, self._save_secs, coordination, options,
            [(h._sync._opt, h._is_chief) for h in self._sync_hooks])
        return _MonitoredRunner(self._session, self._graph, self)

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True, close_summary_writer=True):
        sess = self.prepare_or_wait_for_session(master, config)
        try:
            yield sess
        finally:
            self._end()

    def _end(self):
        if self._session is None:
            return
        session, self._session = self._session, None
        done = self._done
        if done is not None:
            counter, inc, num_workers, cluster, task = done
            session.run([], [], [inc._out.op])
        session.close()
        if done is not None and self.is_chief:
            self._shut_down_when_done(counter, num_workers, cluster, task)

    def _shut_down_when_done(self, counter, num_workers, cluster, task, wait_secs=600):
        # Only the ps holding the counter and this task: workers that are
        # done may have exited already.
        check = _distflow.Session(_servers_by_target_of_task(task),
                                  {"device_filters": ["/job:ps/task:0", task]})
        deadline = time.monotonic() + wait_secs
        done = 0
        try:
            while time.monotonic() < deadline:
                done = int(check.run([], [counter._out], [], 0)[0])
                if done >= num_workers:
                    break
                time.sleep(0.5)
        finally:
            check.close()
        print(f"Supervisor: {done} of {num_workers} workers done; shutting the cluster down", file=sys.stderr)
        _distflow.shutdown_cluster(cluster, "training is over", [task])

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        self._stopped = True
        self._end()


class _MonitoredRunner(_fw.Session):
    """What managed_session yields: Session.run's fetch and feed handling,
    steps run by the monitored session."""

    def __init__(self, monitored, graph, supervisor):  # noqa: super-init-not-called
        self.graph = graph
        self._monitored = monitored
        self._sv = supervisor
        self._sess = self  # Session.run calls self._sess.run(feeds, outputs, targets, timeout)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if fetches is self:  # never
            raise TypeError
        return _fw.Session.run(self, fetches, feed_dict=feed_dict, options=options)

    def _global_step_value(self):
        """The global step after the last step (or at creation), as the
        monitored session fetched it; -1 without one."""
        return self._monitored.global_step

    def _run_raw(self, feeds, outputs, targets, timeout):
        return self._monitored.run(feeds, outputs, targets)

    def should_stop(self):
        return self._sv.should_stop()

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- Saver ------------------------------------------------------------------------

class Saver:
    """tf.train.Saver: save(sess, "dir/model.ckpt", global_step=n) writes
    dir/model.ckpt-n (each task holding variables writes its own shard; the
    newest max_to_keep are kept) and returns that prefix; restore(sess,
    prefix) checks the checkpoint against the model first (another model's
    is a FailedPreconditionError listing the differences). Without
    global_step, TensorFlow writes save_path itself; distflow always
    appends a step, -0 then."""

    def __init__(self, var_list=None, max_to_keep=5, **unused):
        self._graph = _fw.get_default_graph()
        if isinstance(var_list, dict):
            raise NotImplementedError("Saver(var_list=dict): checkpoint keys are the variables' names")
        self._var_list = [v._out for v in (var_list or [])]
        self._max_to_keep = max_to_keep
        self._savers = {}  # by basename

    def _saver(self, basename):
        if basename not in self._savers:
            with self._graph.as_default():
                self._savers[basename] = _distflow.Saver(self._graph._scope(), self._var_list,
                                                         self._max_to_keep, basename)
        return self._savers[basename]

    @staticmethod
    def _plain(sess):
        if not isinstance(sess, _fw.Session) or isinstance(sess, _MonitoredRunner):
            raise NotImplementedError("Saver.save/restore take a tf.Session (a Supervisor checkpoints by itself)")
        return sess._sess

    def save(self, sess, save_path, global_step=None, **unused):
        import os
        logdir, basename = os.path.split(os.path.abspath(save_path))
        step = 0 if global_step is None else (int(sess.run(global_step)) if isinstance(global_step, _fw.Tensor)
                                              else int(global_step))
        return self._saver(basename).save(self._plain(sess), logdir, step)

    def restore(self, sess, save_path):
        import os
        return self._saver(os.path.basename(save_path).rsplit("-", 1)[0]).restore(self._plain(sess), save_path)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest checkpoint prefix of `checkpoint_dir`, or None."""
    return _distflow.latest_checkpoint(checkpoint_dir)


# ---- MonitoredTrainingSession ------------------------------------------------------

def create_global_step(graph=None):
    """An int64 variable "global_step" (not trainable), zero at first."""
    g = graph or _fw.get_default_graph()
    if "global_step" in g._variables:
        raise ValueError("global_step already exists")
    with g.as_default():
        return _fw.get_variable("global_step", [], dtype=_fw._dtypes.int64,
                                initializer=_fw.zeros_initializer(), trainable=False)


def get_global_step(graph=None):
    g = graph or _fw.get_default_graph()
    return g._variables.get("global_step")


def get_or_create_global_step(graph=None):
    return get_global_step(graph) or create_global_step(graph)


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


class _SyncReplicasHook(SessionRunHook):
    """SyncReplicasOptimizer.make_session_run_hook's: runs in C++ inside the
    monitored session (the chief's applies the steps)."""

    def __init__(self, sync, is_chief):
        self._sync, self._is_chief = sync, is_chief


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
        self._fetch = {tag: (g.as_graph_element(t, allow_operation=False) if isinstance(t, str) else t)
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

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._raw)
        hook_fetches, feeds = [], dict(feed_dict or {})
        for h in self._hooks:
            args = h.before_run(context)
            hook_fetches.append(None if args is None else args.fetches)
            for key, value in ((args.feed_dict if args is not None else None) or {}).items():
                if key in feeds:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user. Conflict(s): {key}")
                feeds[key] = value
        has = [f is not None for f in hook_fetches]
        if any(has):
            outputs = super().run([fetches, [f for f in hook_fetches if f is not None]], feed_dict=feeds,
                                  options=options)
            results, extra = outputs[0], iter(outputs[1])
            hook_results = [next(extra) if h else None for h in has]
        else:
            results = super().run(fetches, feed_dict=feeds, options=options)
            hook_results = [None] * len(self._hooks)
        for h, r in zip(self._hooks, hook_results):
            h.after_run(context, SessionRunValues(results=r, options=options, run_metadata=run_metadata))
        if context.stop_requested:
            self._sv.request_stop()
        return results

    def request_stop(self):
        self._sv.request_stop()

    def close(self, _error=False):
        if self._closed:
            return
        self._closed = True
        try:
            if not _error:
                for h in self._hooks:
                    h.end(self._raw)
        finally:
            self._sv.stop()

    def __exit__(self, exc_type, exc, tb):
        self.close(_error=exc_type is not None)
        return False


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None, hooks=None,  # noqa: N802
                             chief_only_hooks=None, save_checkpoint_secs=600, save_summaries_steps=None,
                             save_summaries_secs=None, config=None, stop_grace_period_secs=120,
                             log_step_count_steps=100, max_wait_secs=7200, save_checkpoint_steps=None):
    """tf.train.MonitoredTrainingSession: a Supervisor's session (restore or
    initialise, checkpoints, recovery) with hooks run after each step."""
    if scaffold is not None:
        raise NotImplementedError("MonitoredTrainingSession(scaffold=...)")
    if save_checkpoint_steps is not None:
        raise NotImplementedError("MonitoredTrainingSession(save_checkpoint_steps=...); use save_checkpoint_secs")
    g = _fw.get_default_graph()
    sv = Supervisor(is_chief=is_chief, logdir=checkpoint_dir, global_step=get_global_step(g),
                    save_model_secs=save_checkpoint_secs or 0, graph=g)
    all_hooks = list(hooks or []) + (list(chief_only_hooks or []) if is_chief else [])
    sv._sync_hooks = [h for h in all_hooks if isinstance(h, _SyncReplicasHook)]
    all_hooks = [h for h in all_hooks if not isinstance(h, _SyncReplicasHook)]
    with g.as_default():
        for h in all_hooks:
            h.begin()  # before the session finalizes the graph: hooks may add ops
    runner = sv.prepare_or_wait_for_session(master, config)
    return _HookedSession(runner._monitored, g, sv, all_hooks)


_servers_by_target = {}


def _servers_by_target_of_task(task):
    for target, server in _servers_by_target.items():
        if server.task_name == task:
            return target
    raise RuntimeError(f"no server for {task} in this process")
