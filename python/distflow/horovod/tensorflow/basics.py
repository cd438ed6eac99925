"""hvd.init() and the process's place in the job: rank, size, local rank.

The rank comes from DISTFLOW_CONFIG, which `distflow-launch --ps 0 --workers
N` gives every process ({"cluster": {"worker": [...]}, "task": {"type":
"worker", "index": RANK}}). init() starts this task's server and makes it
the target of every session made with target "" (tf.Session(),
MonitoredTrainingSession(master="")), limited to this task's devices, then
waits until every rank's server is up. The collective group is rebuilt
at the job's coordinator after a rank died and was restarted
(docs/COLLECTIVES.md). At exit, every rank waits for the
others (two barriers), so no rank's exit breaks a collective another still
runs; a rank that ends with an uncaught exception leaves at once, and the
others' collectives fail naming it.

The launcher appends --job_name, --task_index, --cluster_spec (and
--status_port; its SLURM script --job_layout and --cluster_spec) to the
program's arguments; importing this module removes them from sys.argv when
they agree with DISTFLOW_CONFIG, so a Horovod program's own argument parser
never sees them. A worker that joins a running elastic job is told where
in DISTFLOW_JOIN and DISTFLOW_JOIN_AS (its argv has nothing of the launcher's
for a parser that reads abbreviations to take for one of its own flags);
--join=ADDRESS --join_as=HOST:PORT as its last arguments say the same.

Elastic mode (Horovod's hvd.elastic; docs/COLLECTIVES.md, Elastic groups):
under `distflow-launch --ps 0 --min_workers M --max_workers N` (which sets
DISTFLOW_ELASTIC=1, as horovodrun sets HOROVOD_ELASTIC=1) every collective
runs in the elastic group (group_size 0): every live worker of the job,
built at the job's coordinator by init() and again by each
reset of hvd.elastic.run. The coordinator is a task of its own (job
"coordinator", which the launcher adds to DISTFLOW_CONFIG's cluster), not
a rank, so any rank may die, rank 0 too. rank() and size() are those of
the group's last build; rank 0 is the oldest worker (it holds the state
every other takes in State.sync()). A worker that joins (--join) enters the group when the
others next check for host updates (State.commit()). Process sets (fixed
lists of ranks) are not supported in elastic mode."""
import atexit
import json
import os
import sys

from distflow import _distflow
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.train import server as _server

LAUNCH_COMMAND = "distflow-launch --ps 0 --workers N -- python3 PROGRAM [ARGS]"
ELASTIC_TIMEOUT_SECS = 300.0  # how long a rebuild of the elastic group waits for every live worker

# The job of the task that only hosts the coordinator (elastic; launcher.h's kCoordinatorJob).
COORDINATOR_JOB = "coordinator"
# The group of the init and exit barriers; the program's own collectives
# use mpi_ops.GROUP_KEY.
CONTROL_GROUP_KEY = 1 << 30
# (--job_layout: the SLURM script of distflow-launch --emit slurm; --join and
# --join_as: a worker joining a running elastic job.)
_LAUNCHER_FLAGS = ("--job_name=", "--task_index=", "--cluster_spec=", "--status_port=", "--job_layout=", "--join=",
                   "--join_as=")


class _State:
    def __init__(self, cluster, rank, status_port, elastic=False):
        workers = cluster["worker"]
        self.cluster = cluster
        self.task_index = rank  # the task's index in the job (its rank, unless elastic)
        self.rank = rank
        self.size = len(workers)
        self.task = f"/job:worker/task:{rank}"
        self.elastic = elastic
        self.generation = 0
        self.members = []  # elastic: task names in rank order
        addresses = dict(enumerate(workers)) if isinstance(workers, list) else dict(workers)
        self._set_local(addresses, sorted(addresses))
        self.status_port = status_port
        self.server = None
        self.failed = False  # an uncaught exception: leave without the exit barriers
        self.finished = False

    def _set_local(self, addresses, ranks_tasks):
        """local_rank/local_size: the ranks (tasks in `ranks_tasks` order) on this task's host."""
        host = str(addresses.get(self.task_index, "")).rsplit(":", 1)[0]
        same = [t for t in ranks_tasks if str(addresses.get(t, "")).rsplit(":", 1)[0] == host]
        self.local_rank = same.index(self.task_index) if self.task_index in same else 0
        self.local_size = max(1, len(same))

    @property
    def group_size(self):
        """The collectives' group_size attribute: 0 (the elastic group) or the job's workers."""
        return 0 if self.elastic else self.size


_state = None
_status_port = -1
_join = None  # (coordinator address, this task's address) of a worker joining a running elastic job


def _strip_launcher_flags():
    """Removes the flags distflow-launch appends (the last arguments) from
    sys.argv, remembering --status_port for the server. Only whole flags
    of the launcher's, exactly as it writes them (--join=..., never
    --joint=... or a --jo abbreviation), and only as the last arguments.
    A worker that joins an elastic all-reduce job is told where in its
    environment (DISTFLOW_JOIN, DISTFLOW_JOIN_AS), so nothing of the kind
    is in sys.argv for the program's own parser to mistake."""
    global _status_port, _join
    env_join = (os.environ.get("DISTFLOW_JOIN", ""), os.environ.get("DISTFLOW_JOIN_AS", ""))
    if all(env_join):
        _join = env_join
    # A joining worker has no DISTFLOW_CONFIG: its --join/--join_as say where to join.
    if not os.environ.get("DISTFLOW_CONFIG") and not any(a.startswith("--join=") for a in sys.argv):
        return
    argv = sys.argv
    end = len(argv)
    while end > 1 and argv[end - 1].startswith(_LAUNCHER_FLAGS):
        end -= 1
    tail = argv[end:]
    joins = dict(a[2:].split("=", 1) for a in tail if a.startswith(("--join=", "--join_as=")))
    if not any(a.startswith(("--job_name=", "--job_layout=")) for a in tail) and sorted(joins) != ["join", "join_as"]:
        return
    for a in tail:
        if a.startswith("--status_port="):
            try:
                _status_port = int(a.split("=", 1)[1])
            except ValueError:
                return
    if joins:
        _join = (joins["join"], joins["join_as"])
    del argv[end:]


_strip_launcher_flags()


def _read_config():
    raw = os.environ.get("DISTFLOW_CONFIG")
    if not raw:
        raise ValueError("hvd.init(): this process has no rank: DISTFLOW_CONFIG is not set, so it was not started "
                         f"by distflow-launch. Start every rank with: {LAUNCH_COMMAND} (horovodrun -np N's "
                         "equivalent; --workers 1 runs a single process)")
    try:
        conf = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"hvd.init(): DISTFLOW_CONFIG is not valid JSON ({e}): {raw!r}. Start every rank with: "
                         f"{LAUNCH_COMMAND}") from None
    cluster = conf.get("cluster") if isinstance(conf, dict) else None
    task = conf.get("task") if isinstance(conf, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ValueError(f"hvd.init(): DISTFLOW_CONFIG needs a \"cluster\" and a \"task\", got {raw!r}. Start every "
                         f"rank with: {LAUNCH_COMMAND}")
    jobs = sorted(cluster)
    # Elastic: distflow-launch adds a task that only hosts the job's
    # coordinator (job "coordinator", outside the ranks).
    coordinator = cluster.get(COORDINATOR_JOB) if jobs == [COORDINATOR_JOB, "worker"] else None
    if coordinator is not None and not _elastic_requested():
        raise ValueError(f"hvd.init(): the cluster has a {COORDINATOR_JOB!r} job, which only elastic jobs have "
                         "(distflow-launch --ps 0 --min_workers M --max_workers N sets DISTFLOW_ELASTIC=1); start "
                         f"every rank with: {LAUNCH_COMMAND}")
    if jobs != ["worker"] and coordinator is None:
        raise ValueError(f"hvd.init(): the cluster has jobs {jobs}, but Horovod-style training runs workers only, "
                         f"each holding the whole model (no parameter servers). Start every rank with: "
                         f"{LAUNCH_COMMAND}")
    if task.get("type") != "worker":
        raise ValueError(f"hvd.init(): this process is task {task.get('type')!r}, not a worker. Start every rank "
                         f"with: {LAUNCH_COMMAND}")
    workers = cluster["worker"]
    if isinstance(workers, dict):
        workers = [workers[k] for k in sorted(workers, key=int)]
    try:
        rank = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise ValueError(f"hvd.init(): DISTFLOW_CONFIG's task index {task.get('index')!r} is not a number") from None
    if not 0 <= rank < len(workers):
        raise ValueError(f"hvd.init(): DISTFLOW_CONFIG says rank {rank}, but its cluster has {len(workers)} workers "
                         f"(ranks 0..{len(workers) - 1})")
    out = {"worker": list(workers)}
    if coordinator is not None:
        out[COORDINATOR_JOB] = [coordinator[k] for k in sorted(coordinator, key=int)] \
            if isinstance(coordinator, dict) else list(coordinator)
    return out, rank


def _elastic_requested():
    return _join is not None or os.environ.get("DISTFLOW_ELASTIC") == "1" or \
        os.environ.get("HOROVOD_ELASTIC") == "1"


def _heartbeat_timeout_secs():
    """DISTFLOW_HEARTBEAT_TIMEOUT_SECS: how long a silent rank lives before the
    others' coordinator declares it dead (in elastic mode, how long the
    survivors of a death wait before they go on without it); default 10."""
    raw = os.environ.get("DISTFLOW_HEARTBEAT_TIMEOUT_SECS", "")
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise ValueError(f"DISTFLOW_HEARTBEAT_TIMEOUT_SECS is {raw!r}; it must be a number of seconds above 0")
    return value


def init(comm=None, process_sets=None):
    """Starts this rank's task (its server) and waits for every other rank's.
    In elastic mode, builds the elastic group with every live worker (see
    the module's doc). comm: Horovod's list of ranks; only all of them (or
    None) is supported. process_sets: hvd.ProcessSet objects (or lists of
    ranks) to register, in the same order on every rank; "dynamic"
    (Horovod's) is accepted too: hvd.add_process_set() works after init()
    either way. Not in elastic mode, whose ranks change."""
    global _state
    if _state is not None:
        return
    if process_sets is not None and process_sets != "dynamic" and not isinstance(process_sets, (list, tuple)):
        raise ValueError(f"hvd.init(process_sets={process_sets!r}): give a list of hvd.ProcessSet, or \"dynamic\"")
    elastic = _elastic_requested()
    if elastic and isinstance(process_sets, (list, tuple)) and process_sets:
        raise NotImplementedError("hvd.init(process_sets=...) in elastic mode: a process set is a fixed list of "
                                  "ranks, and an elastic job's ranks change as workers join and leave; use the "
                                  "global process set (process_set=None)")
    heartbeat = _heartbeat_timeout_secs()
    if _join is not None:
        from distflow import elastic as _elastic
        task_index, spec = _elastic.join_cluster(_join[0], _join[1])
        live = spec.as_dict()
        cluster = {job: live[job] for job in ("worker", COORDINATOR_JOB) if job in live}
        my_rank = task_index
    else:
        cluster, my_rank = _read_config()
    state = _State(cluster, my_rank, _status_port, elastic=elastic)
    if comm is not None and sorted(comm) != list(range(state.size)):
        raise ValueError(f"hvd.init(comm={comm!r}): the job has {state.size} ranks (0..{state.size - 1}) and "
                         f"distflow runs every collective across all of them; give comm=None")
    state.server = _server.Server(cluster, "worker", my_rank, status_port=state.status_port,
                                  heartbeat_timeout_secs=heartbeat)
    _fw._default_session_task = (state.server.target, state.task)
    _state = state
    if isinstance(process_sets, (list, tuple)):
        from distflow.horovod.tensorflow import process_sets as _sets
        try:
            for ps in process_sets:
                _sets.add_process_set(ps)
        except Exception:
            state.failed = True
            raise
    try:
        if elastic:
            rebuild()
        else:
            _wait_for_ranks()
    except Exception:
        state.failed = True
        raise
    _install_exit_handlers()


def rebuild():
    """Elastic mode: (re)builds the group with every live worker of the job
    (each must call it at the same point: init, and hvd.elastic.run's reset)
    and takes this rank's rank and size from it."""
    state = _check("elastic reset")
    if not state.elastic:
        raise ValueError("hvd: the collective group is elastic only under distflow-launch --min_workers/"
                         "--max_workers (DISTFLOW_ELASTIC=1)")
    generation, rank_, members = _distflow.rebuild_elastic_group(state.server._server, ELASTIC_TIMEOUT_SECS)
    state.generation, state.rank, state.size, state.members = generation, rank_, len(members), list(members)
    tasks = [int(m.rsplit(":", 1)[1]) for m in members]
    addresses = {}
    try:
        from distflow import elastic as _elastic
        for m in _elastic.cluster_members(_coordinator_address(state)):
            if m.task.startswith("/job:worker/") and m.address:
                addresses[int(m.task.rsplit(":", 1)[1])] = m.address
    except Exception:  # noqa: B902 (local ranks are a hint; the group is built)
        addresses = {state.task_index: "?"}
    state._set_local(addresses, tasks)
    print(f"hvd: task {state.task_index} is rank {state.rank} of {state.size} in generation {generation} of the "
          f"elastic group", file=sys.stderr, flush=True)


def _coordinator_address(state):
    """The address of the task that keeps the job's membership: the
    coordinator task's, else the one a joiner joined through, else worker
    0's (CoordinatorTask's rule)."""
    coordinator = state.cluster.get(COORDINATOR_JOB)
    if coordinator:
        return coordinator[0] if isinstance(coordinator, list) else coordinator[min(coordinator)]
    if _join is not None:
        return _join[0]
    workers = state.cluster["worker"]
    return workers[0] if isinstance(workers, list) else workers[min(workers)]


def _wait_for_ranks():
    """Returns once every rank's server answers (up to 300 s): a session over
    every worker waits for them when it is made. No collective: a rank that
    was restarted into a running job must not run one the others do not run
    (its first collective meets theirs once the group is rebuilt)."""
    g = _fw.Graph()
    with g.as_default():
        op = _fw.constant(1, dtype=_fw._dtypes.int32, name="hvd_init_ranks_up")
    sess = _fw.Session(_state.server.target, graph=g, config=_fw.ConfigProto(device_filters=["/job:worker"]))
    try:
        sess.run(op)
    finally:
        sess.close()


def _barrier(what, instance, device_filters):
    """A CollectiveReduce of 1 across every rank, in a graph of its own: it
    returns once every rank has started it."""
    g = _fw.Graph()
    with g.as_default():
        op = _raw.CollectiveReduce(input=_fw.constant(1, dtype=_fw._dtypes.int32), group_size=_state.group_size,
                                   group_key=CONTROL_GROUP_KEY, instance_key=instance, merge_op="Add",
                                   final_op="Id", name=f"hvd_{what}_barrier")
    sess = _fw.Session(_state.server.target, graph=g, config=_fw.ConfigProto(device_filters=device_filters))
    try:
        got = sess.run(op)
    finally:
        sess.close()
    if int(got) != _state.size:
        raise RuntimeError(f"hvd {what} barrier: {int(got)} ranks joined, expected {_state.size}")


def _install_exit_handlers():
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        if _state is not None:
            _state.failed = True
        previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(_at_exit)


def _at_exit():
    if _state is None or _state.failed or _state.finished:
        return
    try:
        shutdown()
    except Exception as e:  # noqa: B902 (reported; the process is ending anyway)
        print(f"hvd: rank {_state.rank}: waiting for the other ranks at exit failed: {e}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


def shutdown():
    """Waits until every rank has finished its collectives (called at exit
    by itself). After it, this rank runs no more collectives."""
    if _state is None or _state.finished:
        return
    _state.finished = True
    if _state.size == 1 and not _state.elastic:
        return
    own = [_state.task]
    # Every rank got here, so every rank finished the collectives before.
    _barrier("exit", 2, own)
    # Every rank finished the first barrier. A peer that finishes this one
    # first may exit while this rank still reads its part: the job is done
    # by then, so that error is no failure.
    try:
        _barrier("exit_done", 3, own)
    except _distflow.Error:
        pass


def _check(what):
    if _state is None:
        raise ValueError(f"Horovod has not been initialized; use hvd.init() before hvd.{what}().")
    return _state


def is_initialized():
    return _state is not None


def rank():
    return _check("rank").rank


def size():
    return _check("size").size


def local_rank():
    return _check("local_rank").local_rank


def local_size():
    return _check("local_size").local_size


def mpi_threads_supported():
    _check("mpi_threads_supported")
    return False


def _false():
    return False


mpi_built = mpi_enabled = nccl_built = gloo_built = gloo_enabled = ddl_built = ccl_built = cuda_built = \
    rocm_built = _false
