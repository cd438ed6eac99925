"""tf.train.SyncReplicasOptimizer and the hook every worker runs."""
from distflow import _distflow
from distflow import framework as _fw
from distflow.train.optimizer import Optimizer
from distflow.train.server import _servers_by_target
from distflow.train.session_run_hook import SessionRunHook


class SyncReplicasOptimizer(Optimizer):
    """tf.train.SyncReplicasOptimizer: synchronous between-graph training
    (distflow/train/sync_replicas_optimizer.h). Each step averages
    `replicas_to_aggregate` gradients, one per worker, and applies them once
    with `opt`; with more workers (`total_num_replicas`) the slowest of a
    step are backups whose gradients are dropped. Every worker passes
    make_session_run_hook(is_chief) to MonitoredTrainingSession.

    distflow names each worker's gradients by its replica: `replica_id`
    (TensorFlow has no such argument) defaults to the task index of this
    process's tf.train.Server of job "worker".

    distflow extensions (TensorFlow has none of these arguments):
    `replica_id` and `step_timeout_secs` (how long a worker waits for its
    step to be applied), and elastic training:

    elastic=True: the gradients aggregated per step follow the workers in
    the job instead of staying `replicas_to_aggregate`. Before every step
    the chief asks the job's coordinator (ps task 0, which keeps the
    membership with the heartbeats) how many workers are alive and
    aggregates max(min_replicas, live - backups) gradients, the backups
    being total_num_replicas - replicas_to_aggregate. A worker that joins
    the running job (distflow.elastic.join_cluster) is waited for from the
    next step; one that leaves, or dies and is declared dead, is not waited
    for any more. Every worker passes elastic=True; a joined worker's
    replica is its task index. As the C++ SyncReplicasOptions::live_replicas
    (distflow/train/sync_replicas_optimizer.h)."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None, variable_averages=None,
                 variables_to_average=None, use_locking=False, name="sync_replicas", replica_id=None,
                 step_timeout_secs=120, elastic=False, min_replicas=1):
        if variable_averages is not None or variables_to_average is not None:
            raise NotImplementedError("tf.train.SyncReplicasOptimizer(variable_averages=...)")
        if not isinstance(opt, Optimizer) or isinstance(opt, SyncReplicasOptimizer):
            raise TypeError(f"SyncReplicasOptimizer wraps one of distflow's optimizers, not {type(opt).__name__}")
        if replica_id is None:
            replica_id = _local_worker_index()
        coordinator = _coordinator_address() if elastic else ""
        if not elastic and min_replicas != 1:
            raise ValueError("SyncReplicasOptimizer(min_replicas=...) bounds elastic training; add elastic=True")
        self._wrapped = opt
        self._elastic = bool(elastic)
        self._opt = _distflow.SyncReplicasOptimizer.create(opt._kind, opt._hyper, int(replicas_to_aggregate),
                                                           int(total_num_replicas or 0), int(replica_id),
                                                           float(step_timeout_secs), coordinator, int(min_replicas))

    def minimize(self, loss, global_step=None, var_list=None, name=None, **unused):
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer.minimize needs global_step: it counts the synchronous steps")
        return self._track(super().minimize(loss, global_step=global_step, var_list=var_list, name=name))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer.apply_gradients needs global_step: it counts the synchronous "
                             "steps")
        return self._track(super().apply_gradients(grads_and_vars, global_step=global_step, name=name))

    def _track(self, train_op):
        # A Supervisor of this graph runs the synchronisation without a hook,
        # as TF1's programs written for the token queue expect.
        g = _fw.get_default_graph()
        mine = g.__dict__.setdefault("_sync_replicas_optimizers", [])
        if self not in mine:
            mine.append(self)
        self._graph = g
        return train_op

    # TF1's token-queue attributes. distflow's synchronisation is a barrier
    # run by the chief inside its monitored session (no token queue), so
    # these are the ops and runner a TF1 program passes to its Supervisor,
    # each doing nothing that the barrier does not already do.
    def _noop(self, name):
        if not hasattr(self, "_noops"):
            self._noops = {}
        if name not in self._noops:
            with self._graph.as_default():
                self._noops[name] = _fw.group(name=f"sync_replicas/{name}")
        return self._noops[name]

    @property
    def chief_init_op(self):
        return self._noop("chief_init_op")

    @property
    def local_step_init_op(self):
        return self._noop("local_step_init_op")

    @property
    def ready_for_local_init_op(self):
        return None

    def get_chief_queue_runner(self):
        return _NoQueueRunner()

    def get_init_tokens_op(self, num_tokens=-1):
        return self._noop("init_tokens_op")

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

    @property
    def replicas_aggregated(self):
        """Gradients averaged into the last step the chief's hook applied
        (with elastic=True, the count that followed the membership)."""
        return self._opt.replicas_aggregated

    @property
    def aggregation_changes(self):
        """With elastic=True: how many times the chief's count changed."""
        return self._opt.aggregation_changes


def _local_worker_index():
    workers = [s.task_name for s in _servers_by_target.values() if s.task_name.startswith("/job:worker/")]
    if len(workers) != 1:
        raise ValueError("SyncReplicasOptimizer: this process has " +
                         ("no tf.train.Server of job 'worker'" if not workers else f"several worker servers {workers}")
                         + ", so its replica is unknown; pass replica_id=<this worker's task index>")
    return int(workers[0].rsplit(":", 1)[1])


def _coordinator_address():
    """ps task 0's address, from the cluster of this process's worker server."""
    workers = [s for s in _servers_by_target.values() if s.task_name.startswith("/job:worker/")]
    if len(workers) != 1:
        raise ValueError("SyncReplicasOptimizer(elastic=True) follows the membership kept by the job's coordinator "
                         "(ps task 0), found from this process's tf.train.Server of job 'worker'; this process has "
                         + ("none" if not workers else f"several: {[s.task_name for s in workers]}"))
    ps = workers[0].cluster.get("ps")
    if not ps or 0 not in ps:
        raise ValueError("SyncReplicasOptimizer(elastic=True) needs a ps job with task 0: its coordinator keeps the "
                         f"membership; the cluster of {workers[0].task_name} has jobs {sorted(workers[0].cluster)}")
    return ps[0]


class _SyncReplicasHook(SessionRunHook):
    """SyncReplicasOptimizer.make_session_run_hook's: runs in C++ inside the
    monitored session (the chief's applies the steps)."""

    def __init__(self, sync, is_chief):
        self._sync, self._is_chief = sync, is_chief


class _NoQueueRunner:
    """get_chief_queue_runner()'s: a runner with no threads (the chief's
    barrier runs inside its session)."""

    def create_threads(self, sess, coord=None, daemon=False, start=False):
        return []
