"""tf.train.ClusterSpec, tf.train.Server and the replica device setter."""
from distflow import _distflow


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
    down (the chief's end of training) or stop() is called. distflow's own
    status_port (> 0; 0 for a free one, then .status_port) serves /status
    and /metrics over HTTP on that port. distflow's own shared_memory=False
    stops this task from moving large tensors to and from tasks on its host
    through shared memory (TCP instead; docs/TRANSPORT.md), as
    distflow-server --shared_memory=false and DISTFLOW_SHM=0 do.
    heartbeat_timeout_secs (distflow's) is how long a silent task of the
    cluster lives before it is declared dead (10 s by default)."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None, config=None,
                 start=True, status_port=-1, shared_memory=True, heartbeat_timeout_secs=None):
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
        if not isinstance(shared_memory, bool):
            raise TypeError(f"tf.train.Server(shared_memory=...) takes True or False, not {shared_memory!r}")
        hb_ms = 0 if heartbeat_timeout_secs is None else max(1, int(float(heartbeat_timeout_secs) * 1000))
        self._server = _distflow.Server(cluster._jobs, job_name, int(task_index), int(status_port), shared_memory,
                                        hb_ms)
        self._joined = False
        if start:
            self.start()
        _servers_by_target[self.target] = self._server

    def start(self):
        self._server.start()

    def join(self):
        """Blocks until the server stops. In TensorFlow join() never returns,
        so what a TF1 program writes after a ps's server.join() never runs;
        here the chief shuts the cluster down when training is over, and
        the process then exits cleanly (SystemExit(0)) rather than run on.
        A join ended by this process's own stop() returns."""
        self._server.join()
        self._joined = True
        if not getattr(self, "_stopped_here", False):
            raise SystemExit(0)

    def stop(self):
        self._stopped_here = True
        self._server.stop()

    @property
    def target(self):
        return self._server.target

    @property
    def status_port(self):
        """The port of this task's /status and /metrics page (0: none)."""
        return self._server.status_port

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


_servers_by_target = {}


def _servers_by_target_of_task(task):
    for target, server in _servers_by_target.items():
        if server.task_name == task:
            return target
    raise RuntimeError(f"no server for {task} in this process")
