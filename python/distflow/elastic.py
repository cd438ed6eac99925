"""Elastic membership from Python, a distflow extension (TensorFlow 1 has
none): a worker that is not in the cluster spec joins a running job
through the job's coordinator (ps task 0, which keeps the membership with
the heartbeats), and anyone may ask the coordinator who is in the job.

    import distflow.compat.v1 as tf
    from distflow import elastic

    task_index, cluster = elastic.join_cluster("10.0.0.1:2222", "10.0.0.7:2230")
    server = tf.train.Server(cluster, job_name="worker", task_index=task_index)
    # ... the same graph as every worker, with
    # tf.train.SyncReplicasOptimizer(..., elastic=True) for synchronous training.

A joined worker is a worker like the others from then on: it heartbeats, is
declared dead if it stops, and leaves the job when its server stops
(server.stop(), or the end of the process).

A worker's data can follow the job too: worker_shard gives the shard this
worker takes among the live workers (the rule of the C++ book program's
--reshard_every_steps); ask again every few steps and re-read the data
when it changes:

    index, count = elastic.worker_shard("10.0.0.1:2222", task_index)
    dataset = dataset.shard(count, index)

A worker that `distflow-launch --min_workers M --max_workers N` starts to
join the job is told where in its environment, not in its arguments (so
the program's own argument parser cannot take them for one of its flags):
DISTFLOW_JOIN (the coordinator) and DISTFLOW_JOIN_AS (the address to serve
on); launcher_join() reads them:

    join = elastic.launcher_join()
    if join:
        task_index, cluster = elastic.join_cluster(*join)

The C++ calls are JoinCluster, ListClusterMembers and LiveWorkerShard
(distflow/elastic.h)."""
import collections
import os

from distflow import _distflow
from distflow.train.server import ClusterSpec

Member = collections.namedtuple("Member", ["task", "address", "state", "joined"])
Member.__doc__ = """A task the coordinator knows: its name ("/job:worker/replica:0/task:3"), address ("" if
unknown), state (UNKNOWN, ALIVE, DEAD or LEFT) and whether it joined the running job."""


def join_cluster(coordinator_address, address, job_name="worker", wait_secs=60):
    """Joins the running job whose coordinator serves on
    `coordinator_address` as a task of `job_name` that will serve on
    `address` (host:port). Returns (task_index, ClusterSpec): this task's
    index and the job now, this task included; start its
    tf.train.Server(cluster, job_name, task_index) soon after (a joined
    task that does not heartbeat within the heartbeat timeout is declared
    dead). Retries while the coordinator is unreachable, for up to
    `wait_secs`. InvalidArgumentError for a malformed address,
    FailedPreconditionError if a live task has `address` or the task at
    `coordinator_address` is not the coordinator."""
    task_index, jobs = _distflow.join_cluster(str(coordinator_address), str(job_name), str(address),
                                              float(wait_secs))
    return task_index, ClusterSpec(jobs)


def launcher_join():
    """(coordinator_address, address) when distflow-launch started this
    process to join a running job (DISTFLOW_JOIN and DISTFLOW_JOIN_AS in
    its environment), else None. ValueError when only one of them is set."""
    coordinator, address = os.environ.get("DISTFLOW_JOIN", ""), os.environ.get("DISTFLOW_JOIN_AS", "")
    if not coordinator and not address:
        return None
    if not coordinator or not address:
        raise ValueError("DISTFLOW_JOIN=%r and DISTFLOW_JOIN_AS=%r: a joining worker needs both (the coordinator's "
                         "host:port and its own)" % (coordinator, address))
    return coordinator, address


def cluster_members(coordinator_address):
    """Every task the coordinator at `coordinator_address` knows, in name order, as Member tuples."""
    return [Member(*m) for m in _distflow.list_cluster_members(str(coordinator_address))]


def worker_shard(coordinator_address, task_index, job_name="worker"):
    """(index, count): the shard of the data worker `task_index` takes in
    the job as its coordinator (at `coordinator_address`, ps task 0) holds
    it now. `count` is the number of workers of `job_name` that are alive
    or not heard from yet (not declared dead, not left), `index` this
    worker's position among them by task index; so once every live worker
    has asked since the last join or leave, their shards (shard(count,
    index)) are disjoint and cover the data. NotFoundError if the
    coordinator does not hold this worker as live."""
    index, count = _distflow.live_worker_shard(str(coordinator_address), int(task_index), str(job_name))
    return index, count
