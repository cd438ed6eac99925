"""hvd.elastic for TensorFlow 1 programs (horovod.tensorflow.elastic):

    import distflow.horovod.tensorflow as hvd
    hvd.init()
    ...  # the graph, hvd.DistributedOptimizer(...), sess.run(init)
    state = hvd.elastic.TensorFlowState(session=sess, step=0)

    @hvd.elastic.run
    def train(state):
        while state.step < STEPS:
            sess.run(train_op)
            state.step += 1
            if state.step % COMMIT_EVERY == 0:
                state.commit()

    train(state)

Started by `distflow-launch --ps 0 --min_workers M --max_workers N`. The
collectives run in the elastic group (every live worker; basics.py). When a
worker joins, every rank raises HostsUpdatedInterrupt at its next commit;
when a rank dies, the others' step fails in a collective and becomes a
HorovodInternalError, and they go back to their last commit. Either way
hvd.elastic.run rebuilds the group with the workers alive now (a death is
noticed once the heartbeats declare the rank dead:
DISTFLOW_HEARTBEAT_TIMEOUT_SECS), calls the reset callbacks (hvd.rank()
and hvd.size() are the new group's) and syncs the state from rank 0, the
oldest rank, before it calls the function again.

The job's coordinator is a task of its own that the launcher starts
beside the workers (as Horovod's driver hosts its rendezvous), so any rank
may die, rank 0 too: the others go back to their last commit, rank 0 of
the rebuilt group is the oldest survivor, and a replacement joins."""
import numpy as np

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import errors as _errors
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.horovod.common import elastic as _common
from distflow.horovod.common.elastic import ObjectState, State, run_fn
from distflow.horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from distflow.horovod.tensorflow import basics as _basics
from distflow.horovod.tensorflow import mpi_ops as _ops
from distflow.horovod.tensorflow import optimizer as _opt

# Instance keys of the elastic control collectives (in basics.CONTROL_GROUP_KEY).
_OBJECT_LENGTH_INSTANCE = 10
_OBJECT_BYTES_INSTANCE = 11
_AGREE_INSTANCE = 12


def _is_collective_failure(e):
    """A step that failed because a collective did (a peer died, cannot be
    reached, or moved on to a rebuild). An InvalidArgumentError (ranks that
    disagree on a shape, a root_rank the group no longer has) is the
    program's, which no rebuild mends: it propagates."""
    if not isinstance(e, _errors.OpError) or isinstance(e, _errors.InvalidArgumentError):
        return False
    text = str(e)
    return any(w in text for w in ("CollectiveReduce", "CollectiveBcast", "CollectiveGather", "collective group",
                                   "elastic group"))


def _reset():
    _basics.rebuild()


def run(func):
    """Horovod's decorator: runs func(state, ...) until it returns, through
    joins and failures (see the module's doc). Collectives must not run
    before the decorated function is called (a joining worker waits in the
    group's rebuild until the others reach a commit)."""
    return run_fn(func, _reset, _is_collective_failure)


def _control_session(graph):
    state = _basics._check("elastic")
    return _fw.Session(state.server.target, graph=graph, config=_fw.ConfigProto(device_filters=[state.task]))


def broadcast_object(obj, root_rank=0, session=None, name=None):
    """Rank `root_rank`'s `obj` (any picklable object) on every rank. Runs
    now, in a graph of its own; every rank must call it at the same point."""
    state = _basics._check("broadcast_object")
    _ops.check_root_rank("broadcast_object", root_rank, state.size)
    if state.size == 1 and not state.elastic:
        return obj
    payload = np.frombuffer(_common.dumps(obj), dtype=np.uint8).astype(np.int32)

    def bcast(value, instance, shape):
        g = _fw.Graph()
        with g.as_default():
            op = _raw.CollectiveBcastSend(input=_fw.constant(value, dtype=_dtypes.int32), group_size=state.group_size,
                                          group_key=_basics.CONTROL_GROUP_KEY, instance_key=instance, shape=shape,
                                          name=name or "HorovodBroadcastObject", **_ops.root_attrs(root_rank))
        sess = _control_session(g)
        try:
            return sess.run(op)
        finally:
            sess.close()

    length = int(bcast(np.int32(payload.size), _OBJECT_LENGTH_INSTANCE, []))
    mine = payload if payload.size == length else np.zeros([length], dtype=np.int32)  # not the root: any bytes
    got = bcast(mine, _OBJECT_BYTES_INSTANCE, [length])
    return _common.loads(np.asarray(got, dtype=np.int32).astype(np.uint8).tobytes())


class _Agreement:
    """The maximum of an int32 flag over the group, in a session kept open
    (check_host_updates runs it at every commit)."""

    def __init__(self):
        state = _basics._check("elastic")
        self._graph = _fw.Graph()
        with self._graph.as_default():
            self._flag = _fw.placeholder(_dtypes.int32, [], name="hvd_host_update_flag")
            self._max = _raw.CollectiveReduce(input=self._flag, group_size=state.group_size,
                                              group_key=_basics.CONTROL_GROUP_KEY, instance_key=_AGREE_INSTANCE,
                                              merge_op="Max", final_op="Id", name="hvd_host_update_agree")
        self._sess = None

    def __call__(self, flag):
        if self._sess is None:
            self._sess = _control_session(self._graph)
        return int(self._sess.run(self._max, feed_dict={self._flag: np.int32(flag)}))


_coordinator_silent = [False]  # said once per outage


def _host_updates():
    """(joined, left) at the coordinator. A coordinator that does not answer
    (the launcher is restarting its task) is no news: the group goes on as
    it is, and asks again at the next commit; a restarted coordinator
    learns the group's generation from these asks (and from rebuilds)."""
    state = _basics._check("check_host_updates")
    try:
        waiting, gone = _distflow.elastic_group_updates(state.server._server)
    except (_errors.UnavailableError, _errors.DeadlineExceededError) as e:
        if not _coordinator_silent[0]:
            print("hvd.elastic: the coordinator does not answer (%s); no host updates until it does" %
                  str(e).splitlines()[0], flush=True)
        _coordinator_silent[0] = True
        return 0, 0
    if _coordinator_silent[0]:
        print("hvd.elastic: the coordinator answers again", flush=True)
    _coordinator_silent[0] = False
    return len(waiting), len(gone)


class TensorFlowState(ObjectState):
    """Horovod's TensorFlowState for TF1 graphs: `variables` (default: every
    global variable, the optimizers' slots and the global step included) in
    `session` (default: the default session), plus kwargs as attributes
    (step=0, epoch=0, ...). Build it after the variables are initialised:
    it saves their values. commit() saves, restore() loads the last save,
    sync() gives every rank rank 0's variables and attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        state = _basics._check("elastic.TensorFlowState")
        self.variables = list(variables) if variables is not None else _opt._global_variables()
        self.session = session or _fw.get_default_session()
        if self.session is None:
            raise ValueError("hvd.elastic.TensorFlowState: give session= (or make one the default session): the "
                             "state's variables live in it")
        self._bcast_op = _opt.broadcast_variables(self.variables, root_rank=0)
        g = _fw.get_default_graph()
        with g.as_default(), _fw.control_dependencies(None):
            tensors = [_ops._tensor("elastic.TensorFlowState", v) for v in self.variables]
            self._feeds = [_fw.placeholder(t.dtype, _ops._static_shape("elastic.TensorFlowState", t),
                                           name="hvd_elastic_restore_value") for t in tensors]
            self._load_op = _fw.group(*[_raw.Assign(ref=v, value=p).op for v, p in zip(self.variables, self._feeds)],
                                      name="hvd_elastic_restore")
        self._reads = tensors
        self._values = None
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=_basics.rank,
                         host_updates=_host_updates if state.elastic else None,
                         agree=_Agreement() if state.elastic else None, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()

    def sync(self):
        self.session.run(self._bcast_op)
        self._save_model()
        super().sync()

    def _save_model(self):
        self._values = self.session.run(self._reads)

    def _load_model(self):
        self.session.run(self._load_op, feed_dict=dict(zip(self._feeds, self._values)))


class TensorFlowKerasState(ObjectState):
    """Horovod's Keras state needs a Keras model's get_weights/set_weights,
    which distflow's Keras does not have."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        raise NotImplementedError("hvd.elastic.TensorFlowKerasState: distflow has no Keras Model with get_weights/"
                                  "set_weights; use hvd.elastic.TensorFlowState(session=..., **attributes)")


__all__ = ["run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState", "HorovodInternalError",
           "HostsUpdatedInterrupt", "broadcast_object"]
