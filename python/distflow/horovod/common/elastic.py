"""The elastic State and run loop that Horovod's frameworks share
(horovod.common.elastic), over distflow's elastic collective group.

run_fn(func, reset) is the loop of hvd.elastic.run: sync the state, run
func; on HorovodInternalError (a collective failed: a rank died) restore
the last commit, on HostsUpdatedInterrupt (workers joined) keep the state
as it is; then reset (rebuild the group with the workers alive now), call
the state's reset callbacks, and run func again from the synced state.

A State's commit() saves it (restore() goes back to it) and checks for
host updates: each rank asks the job's coordinator whether workers wait to
enter the group or members left, and the ranks agree (a max all-reduce of
the answer) so that all of them raise HostsUpdatedInterrupt at the same
commit, as Horovod's do."""
import pickle

from distflow.horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class State:
    """Horovod's State: commit(), restore(), sync(), check_host_updates(),
    register_reset_callbacks(). Subclasses say how to save, restore and
    sync their objects. `bcast_object(obj)` gives every rank rank 0's obj;
    `get_rank()` is this rank; `host_updates()` returns (joined, left)
    counts as this rank sees them; `agree(flag)` the maximum of the ranks'
    flags."""

    def __init__(self, bcast_object, get_rank, host_updates=None, agree=None):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_updates = host_updates
        self._agree = agree
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called (no arguments) after every reset of the group:
        where a program re-shards its data or rescales its learning rate by
        the new hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's driver notification; distflow asks the coordinator at
        each commit instead, so there is nothing to queue."""

    def commit(self):
        """Saves the state (what restore() goes back to after a failure) and
        raises HostsUpdatedInterrupt if workers joined or members left."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank at once if workers wait
        to join the group or members left it (skip_sync when only left)."""
        if self._host_updates is None or self._agree is None:
            return
        joined, left = self._host_updates()
        # 2: workers joined (a sync is needed); 1: members left only.
        flag = 2 if joined else (1 if left else 0)
        agreed = self._agree(flag)
        if agreed:
            raise HostsUpdatedInterrupt(skip_sync=agreed == 1)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        pass


class ObjectState(State):
    """A State of plain Python attributes (epoch=0, batch=0, ...): kwargs
    become attributes; save() remembers them, restore() puts them back and
    sync() gives every rank rank 0's (pickled, broadcast)."""

    def __init__(self, bcast_object, get_rank, host_updates=None, agree=None, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank, host_updates=host_updates, agree=agree)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def run_fn(func, reset, is_collective_failure=None):
    """hvd.elastic.run's loop around func(state, ...): see the module's doc.
    `is_collective_failure(e)` says whether an error of a step is a failed
    collective (it becomes a HorovodInternalError)."""

    def convert(call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except (HorovodInternalError, HostsUpdatedInterrupt):
            raise
        except Exception as e:  # noqa: B902 (only collective failures are converted)
            if is_collective_failure is not None and is_collective_failure(e):
                raise HorovodInternalError(e) from e
            raise

    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    convert(state.sync)
                return convert(func, state, *args, **kwargs)
            except HorovodInternalError as e:
                print(f"hvd.elastic: a collective failed ({_first_line(e)}); restoring the last commit and "
                      f"rebuilding the group", flush=True)
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    wrapper.__wrapped__ = func
    wrapper.__name__ = getattr(func, "__name__", "wrapper")
    wrapper.__doc__ = getattr(func, "__doc__", None)
    return wrapper


def _first_line(e):
    text = str(e.__cause__ or e)
    return text.splitlines()[0][:300] if text else type(e).__name__


def dumps(obj):
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data):
    return pickle.loads(data)  # noqa: S301 (bytes from rank 0 of this job's own group)
