"""Horovod's tensor fusion settings, read from the environment, for
hvd.DistributedOptimizer (optimizer.py) and hvd.allreduce (mpi_ops.py):
HOROVOD_FUSION_THRESHOLD (bytes; 64 MiB by default, 0: no fusion) and
HOROVOD_CYCLE_TIME (ms; unset or 0: no fusion at run time).

With both above 0, every hvd.allreduce op carries CollectiveReduce's
fusion_cycle_ms and fusion_threshold_bytes, as DistributedOptimizer's
gradients do: the executor reduces the ops of one step that become ready
within one cycle together, as rank 0 decides (docs/COLLECTIVES.md, "Cycle
time: fusion at run time")."""
import os

DEFAULT_FUSION_THRESHOLD = 64 << 20


def fusion_threshold():
    """HOROVOD_FUSION_THRESHOLD in bytes (the default when unset)."""
    raw = os.environ.get("HOROVOD_FUSION_THRESHOLD")
    if raw is None or raw == "":
        return DEFAULT_FUSION_THRESHOLD
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"HOROVOD_FUSION_THRESHOLD is {raw!r}; it must be a number of bytes, 0 or more "
                         f"(0: no fusion)")
    return value


def _milliseconds(variable, meaning_of_zero):
    raw = os.environ.get(variable)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"{variable} is {raw!r}; it must be a number of milliseconds, 0 or more "
                         f"(0: {meaning_of_zero})")
    return value


def cycle_time_ms():
    """HOROVOD_CYCLE_TIME in ms, or None when unset (then C++ reads
    DISTFLOW_FUSION_CYCLE_MS; unset too: buckets fixed when the graph is
    built). 0 also means the graph-time buckets."""
    return _milliseconds("HOROVOD_CYCLE_TIME", "fusion into buckets fixed when the graph is built")


def allreduce_attrs(group_size, adasum):
    """The fusion attributes of one hvd.allreduce's CollectiveReduce: the
    cycle (HOROVOD_CYCLE_TIME, else DISTFLOW_FUSION_CYCLE_MS, as C++ reads
    for the optimizer) and the threshold when both are above 0; none for a
    group of one rank or op=hvd.Adasum (reduced alone, as in the
    optimizer). No fusion_set_size: a step may hold any number of
    hvd.allreduce ops, so a flush waits for its cycle to end."""
    cycle = cycle_time_ms()
    if cycle is None:
        cycle = _milliseconds("DISTFLOW_FUSION_CYCLE_MS", "no fusion at run time")
    threshold = fusion_threshold()
    if not cycle or not threshold or adasum or group_size == 1:
        return {}
    return dict(fusion_cycle_ms=float(cycle), fusion_threshold_bytes=int(threshold))
