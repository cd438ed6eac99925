"""Horovod's process sets: collectives among a subset of the ranks.

    even = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[even])          # or hvd.add_process_set(even) after init()
    if even.included():
        total = hvd.allreduce(x, op=hvd.Sum, process_set=even)

Every rank registers the same process sets in the same order (in init() or
add_process_set()), as in Horovod, so a set has the same id everywhere; its
collectives are distflow's collective ops with group_members set to its
ranks (the tasks of the worker job), a group key of its own and instance
keys counted per set, so that ranks outside the set, which do not build its
ops, do not shift the others' keys. Only members build a set's ops: an op
for a set that this rank is not in raises ValueError. A set's group is
rebuilt on its own after a member died and came back (docs/COLLECTIVES.md).
The global process set (every rank) is hvd.global_process_set; in elastic
mode (hvd.elastic) it is the elastic group, and it is the only set: a set is
a fixed list of ranks, and an elastic job's ranks change."""
from distflow.horovod.tensorflow import basics as _basics

# The group key of process set i (i >= 1); the global set uses mpi_ops.GROUP_KEY.
PROCESS_SET_GROUP_KEY_BASE = 1 << 20


class ProcessSet:
    """A subset of the ranks (hvd.ProcessSet([0, 2])). Usable once registered
    (hvd.init(process_sets=[...]) or hvd.add_process_set)."""

    def __init__(self, ranks):
        try:
            ranks = [int(r) for r in ranks]
        except (TypeError, ValueError):
            raise ValueError(f"hvd.ProcessSet takes a list of ranks, not {ranks!r}") from None
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"hvd.ProcessSet({ranks}): a rank appears twice")
        self.ranks = sorted(ranks)
        self.process_set_id = None

    def _check(self, what):
        if self.process_set_id is None:
            raise ValueError(f"hvd: process set {self.ranks} is not registered; pass it to hvd.init(process_sets=...) "
                             f"or hvd.add_process_set() before {what}")

    def size(self):
        self._check("size()")
        return len(self.ranks)

    def included(self):
        """Whether this process is a member."""
        self._check("included()")
        return _basics.rank() in self.ranks

    def rank(self):
        """This process's rank within the set (its position in `ranks`)."""
        self._check("rank()")
        me = _basics.rank()
        if me not in self.ranks:
            raise ValueError(f"hvd: rank {me} is not in process set {self.ranks}")
        return self.ranks.index(me)

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_registered = {}  # id -> ProcessSet, the global one excluded
_next_id = [1]


def _reset():
    _registered.clear()
    _next_id[0] = 1


def add_process_set(process_set):
    """Registers `process_set` (a ProcessSet or a list of ranks) and returns
    it. Every rank must register the same sets in the same order."""
    state = _basics._check("add_process_set")
    _refuse_in_elastic("add_process_set", state)
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"hvd.add_process_set: {process_set} is registered already")
    bad = [r for r in process_set.ranks if not 0 <= r < state.size]
    if not process_set.ranks or bad:
        raise ValueError(f"hvd.add_process_set: process set {process_set.ranks} must list ranks of the job "
                         f"(0..{state.size - 1})" + (f"; {bad} are not" if bad else ""))
    for other in _registered.values():
        if other.ranks == process_set.ranks:
            raise ValueError(f"hvd.add_process_set: ranks {process_set.ranks} are process set "
                             f"{other.process_set_id} already")
    process_set.process_set_id = _next_id[0]
    _next_id[0] += 1
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Deregisters `process_set`; its ops already built still run. True if it
    was registered."""
    _basics._check("remove_process_set")
    if process_set is global_process_set:
        raise ValueError("hvd.remove_process_set: the global process set cannot be removed")
    if _registered.pop(process_set.process_set_id, None) is None:
        return False
    process_set.process_set_id = None
    return True


def _refuse_in_elastic(what, state):
    if state.elastic:
        raise NotImplementedError(f"hvd.{what} with a process set in elastic mode: a process set is a fixed list of "
                                  f"ranks, and an elastic job's ranks change as workers join and leave; use the "
                                  f"global process set (process_set=None)")


def _group(what, process_set):
    """(group_size, group_key, members, this rank's rank in the group, set id)
    for the collectives of `process_set` (None: the global set)."""
    state = _basics._check(what)
    if process_set is None or process_set is global_process_set:
        # group_size 0 in elastic mode: the elastic group, sized at run time.
        return state.group_size, None, [], state.rank, 0
    _refuse_in_elastic(what, state)
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"hvd.{what}: process_set must be an hvd.ProcessSet, not {type(process_set).__name__}")
    if process_set.process_set_id is None or _registered.get(process_set.process_set_id) is not process_set:
        raise ValueError(f"hvd.{what}: process set {process_set.ranks} is not registered; pass it to "
                         f"hvd.init(process_sets=...) or hvd.add_process_set() first")
    if state.rank not in process_set.ranks:
        raise ValueError(f"hvd.{what}: rank {state.rank} is not in process set {process_set.ranks}; only its "
                         f"members build its collectives (check process_set.included())")
    return (len(process_set.ranks), PROCESS_SET_GROUP_KEY_BASE + process_set.process_set_id, list(process_set.ranks),
            process_set.ranks.index(state.rank), process_set.process_set_id)
