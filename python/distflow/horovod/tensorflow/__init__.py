"""Horovod's TF1 API (horovod.tensorflow) over distflow's collective ops, so
a Horovod program runs with only its import changed:

    import distflow.horovod.tensorflow as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(tf.train.AdamOptimizer(0.001 * hvd.size()))
    hooks = [hvd.BroadcastGlobalVariablesHook(0), ...]

and is started with `distflow-launch --ps 0 --workers N -- python3 PROGRAM`
(horovodrun -np N). init() reads this process's rank from the launcher's
DISTFLOW_CONFIG and starts its task's server; sessions made with the
default target ("") then run on that task, so the collective ops reach the
other processes (through the cluster's transport: its token, TLS). Every
rank must build the same Horovod ops in the same order (as Horovod needs
the same names): the ops are paired by the order they were made in.

Process sets (hvd.ProcessSet, init(process_sets=...), add_process_set,
process_set= of the collectives and DistributedOptimizer) and op=hvd.Adasum
work as in Horovod (process_sets.py, docs/COLLECTIVES.md).

What differs from Horovod: no MPI, NCCL or GPUs (nccl_built() etc. are
False); compression other
than none and fp16, and backward_passes_per_step, are not supported and
raise NotImplementedError naming the argument; process sets other than the
global one are not supported in elastic mode (their ranks would change).

hvd.elastic (run, TensorFlowState, State with commit/restore/sync/
check_host_updates/register_reset_callbacks) runs under `distflow-launch
--ps 0 --min_workers M --max_workers N`: workers join and leave, the group
is rebuilt at a commit (see distflow/horovod/tensorflow/elastic.py)."""
from distflow.horovod.tensorflow.basics import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, init,
                                                is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                                                mpi_threads_supported, nccl_built, rank, rocm_built, shutdown,
                                                size)
from distflow.horovod.tensorflow.mpi_ops import (Adasum, Average, Compression, Sum, allgather, allreduce, barrier,
                                                 broadcast)
from distflow.horovod.tensorflow.optimizer import (BroadcastGlobalVariablesHook, DistributedOptimizer,
                                                   broadcast_global_variables, broadcast_variables)
from distflow.horovod.tensorflow.process_sets import (ProcessSet, add_process_set, global_process_set,
                                                      remove_process_set)
from distflow.horovod.tensorflow import elastic  # noqa: E402 (hvd.elastic.run, hvd.elastic.TensorFlowState)
from distflow.horovod.tensorflow.elastic import broadcast_object
from distflow.horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "mpi_built",
           "mpi_enabled", "mpi_threads_supported", "nccl_built", "gloo_built", "gloo_enabled", "ddl_built",
           "ccl_built", "cuda_built", "rocm_built", "allreduce", "allgather", "broadcast", "barrier", "Average",
           "Sum", "Adasum", "Compression", "DistributedOptimizer", "BroadcastGlobalVariablesHook",
           "broadcast_global_variables", "broadcast_variables", "ProcessSet", "add_process_set",
           "remove_process_set", "global_process_set", "elastic", "broadcast_object", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
