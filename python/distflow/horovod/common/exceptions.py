"""Horovod's exceptions (horovod.common.exceptions), raised by distflow's
elastic training in the same situations."""


class HorovodInternalError(RuntimeError):
    """A collective failed: a rank died or cannot be reached. hvd.elastic.run
    restores the last committed state, rebuilds the group without it and
    goes on."""


class HostsUpdatedInterrupt(RuntimeError):
    """Workers joined (or members left) the job: raised by State.commit() /
    check_host_updates() on every rank at the same commit, so hvd.elastic.run
    rebuilds the group with them. skip_sync: only members left, so the
    survivors' states are equal and need no broadcast."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's workers changed" + (" (members left)" if skip_sync else " (workers joined)"))
        self.skip_sync = skip_sync
