"""hvd.DistributedOptimizer and the broadcast of the initial variables.

DistributedOptimizer's compute_gradients all-reduces the gradients with
C++'s AllReduceGradients (train/collective_all_reduce_optimizer.h): small
ones are fused into buckets of up to HOROVOD_FUSION_THRESHOLD bytes (64 MiB
by default; 0: every gradient alone), one CollectiveReduce per bucket, or,
with HOROVOD_CYCLE_TIME (ms) set, at run time: one CollectiveReduce per
gradient, and the gradients ready within one cycle of each other reduced
together as rank 0 decides (docs/COLLECTIVES.md, "Tensor fusion");
compression=hvd.Compression.fp16 sends them as float16; op=hvd.Adasum combines
each gradient alone by Horovod's adaptive summation; process_set= reduces
among its members only."""
from distflow import _distflow
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.horovod.tensorflow import basics as _basics
from distflow.horovod.tensorflow import mpi_ops as _ops
from distflow.horovod.tensorflow import process_sets as _sets
from distflow.horovod.tensorflow.fusion import cycle_time_ms as _cycle_time_ms
from distflow.horovod.tensorflow.fusion import fusion_threshold as _fusion_threshold
from distflow.train.session_run_hook import SessionRunHook


class DistributedOptimizer:
    """Wraps a tf.train optimizer: compute_gradients returns the gradients
    averaged (op=hvd.Average) or summed (hvd.Sum) over every rank;
    apply_gradients is the wrapped optimizer's. Every rank must build it for
    the same variables in the same order."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                 compression=_ops.Compression.none, sparse_as_dense=False, backward_passes_per_step=1,
                 op=_ops.Average, gradient_predivide_factor=1.0, average_aggregated_gradients=False, num_groups=0,
                 groups=None, process_set=None):
        self._state = _basics._check("DistributedOptimizer")
        self._op = _ops._reduce_op("DistributedOptimizer", None, op)
        self._compression = _ops._check_compression("DistributedOptimizer", compression)
        # Checked now (a rank outside the set is told at once); instance keys are taken per graph.
        _sets._group("DistributedOptimizer", process_set)
        self._process_set = process_set
        if self._op is _ops.Adasum and self._compression != "none":
            raise NotImplementedError("hvd.DistributedOptimizer(op=hvd.Adasum, compression=hvd.Compression.fp16): "
                                      "Adasum runs uncompressed; use Compression.none")
        if backward_passes_per_step != 1:
            raise NotImplementedError("hvd.DistributedOptimizer(backward_passes_per_step=...) other than 1 is not "
                                      "supported by distflow")
        if num_groups or groups is not None:
            raise NotImplementedError("hvd.DistributedOptimizer(num_groups=/groups=): distflow fuses by "
                                      "HOROVOD_FUSION_THRESHOLD only")
        if gradient_predivide_factor != 1.0 and self._state.elastic:
            raise NotImplementedError("hvd.DistributedOptimizer(gradient_predivide_factor=...) in an elastic job: "
                                      "the group's size is known only at run time")
        if gradient_predivide_factor != 1.0 and self._op is not _ops.Average:
            raise ValueError("hvd.DistributedOptimizer: gradient_predivide_factor needs op=hvd.Average")
        self._optimizer = optimizer
        self._predivide = float(gradient_predivide_factor)
        self._fusion_threshold = _fusion_threshold()
        self._cycle_time_ms = _cycle_time_ms()
        self._name = name or f"Distributed{type(optimizer).__name__}"

    def compute_gradients(self, loss, var_list=None, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(loss, var_list=var_list, **kwargs)
        return self._allreduce(grads_and_vars)

    def _allreduce(self, grads_and_vars):
        size, key, members, rank, set_id = _sets._group("DistributedOptimizer", self._process_set)
        if size == 1:
            return grads_and_vars
        g = _fw.get_default_graph()
        present = [(i, _fw.convert_to_tensor(gr), v) for i, (gr, v) in enumerate(grads_and_vars) if gr is not None]
        if not present:
            return grads_and_vars
        average = self._op is _ops.Average and self._predivide == 1.0
        with _fw.name_scope(self._name + "_Allreduce"):
            grads = [gr for _, gr, _ in present]
            if self._predivide != 1.0:  # Horovod's: 1/f before the sum, f/size after
                grads = [gr * _fw.constant(1.0 / self._predivide, dtype=gr.dtype) for gr in grads]
            pairs = _distflow.all_reduce_gradients(
                g._scope(), [(gr._out, v._out) for gr, (_, _, v) in zip(grads, present)], size, rank,
                _ops.GROUP_KEY if key is None else key, _ops._instance_keys(len(present), set_id), average, 0.0,
                self._fusion_threshold, self._compression == "fp16", members, self._op is _ops.Adasum,
                self._cycle_time_ms)
            reduced = [_fw.Tensor(gr, g) for gr, _ in pairs]
            if self._predivide != 1.0:
                reduced = [gr * _fw.constant(self._predivide / size, dtype=gr.dtype) for gr in reduced]
        out = list(grads_and_vars)
        for (i, _, v), gr in zip(present, reduced):
            out[i] = (gr, v)
        return out

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        grads_and_vars = self.compute_gradients(loss, var_list=var_list)
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def __getattr__(self, name):  # get_slot, get_slot_names, variables, ...: the wrapped optimizer's
        return getattr(self._optimizer, name)


def broadcast_variables(variables, root_rank, process_set=None):
    """An op giving every variable of `variables` rank `root_rank`'s value.
    root_rank 0 means the group's root: rank 0 at the start and, after a
    rank died and the group was rebuilt, the lowest of the ranks that kept
    running (theirs is the newest state), so running the op again after a
    recovery gives a restarted rank the survivors' values. Any other
    root_rank is that rank of the job (of the group's last build in an
    elastic job), at the start and after a rebuild alike. With a process
    set, its members take root_rank's values (a fixed root)."""
    state = _basics._check("broadcast_variables")
    _ops.check_root_rank("broadcast_variables", root_rank, state.size)
    ops = []
    in_set = process_set is not None and process_set is not _sets.global_process_set
    if in_set:
        for v in variables:
            value = _ops.broadcast(v, root_rank, name="HorovodBroadcast_" + v.op.name.replace("/", "_"),
                                   process_set=process_set)
            ops.append(value.op if state.rank == int(root_rank) else _raw.Assign(ref=v, value=value).op)
        return _fw.group(*ops)
    if state.size == 1 and not state.elastic:
        return _fw.group(*[_ops.broadcast(v, root_rank).op for v in variables])
    # Every rank runs CollectiveBcastSend with its own value; the root sends,
    # every rank assigns what arrives (the root its own value again).
    for v in variables:
        t = _ops._tensor("broadcast_variables", v)
        value = _raw.CollectiveBcastSend(input=t, group_size=state.group_size, group_key=_ops.GROUP_KEY,
                                         instance_key=_ops._instance_keys(),
                                         shape=_ops._static_shape("broadcast_variables", t),
                                         name="HorovodBroadcast_" + v.op.name.replace("/", "_"),
                                         **_ops.root_attrs(root_rank))
        ops.append(_raw.Assign(ref=v, value=value).op)
    return _fw.group(*ops)


def _global_variables():
    """The global variables as TensorFlow has them: the program's, and those
    C++ made for it (the optimizers' slots, which TF1 also collects), in the
    order they were made; not the local ones."""
    g = _fw.get_default_graph()
    python = {v.name: v for v in _fw.global_variables()}
    local = {v.name for v in _fw.local_variables()}
    out, seen = [], set()
    for o in _distflow.graph_variables(g._root):
        if o.name in local or o.name in seen:
            continue
        seen.add(o.name)
        v = python.get(o.name)
        out.append(_fw.Tensor(o, g) if v is None else v)
    return out + [v for name, v in python.items() if name not in seen]


def broadcast_global_variables(root_rank):
    """An op giving every global variable (optimizer slots too) rank
    `root_rank`'s value: run it once after initialisation or restore so every
    rank starts from the same model."""
    _basics._check("broadcast_global_variables")
    return broadcast_variables(_global_variables(), root_rank)


class BroadcastGlobalVariablesHook(SessionRunHook):
    """Broadcasts the global variables from `root_rank` once the session is
    made (MonitoredTrainingSession(hooks=[...])). Under a monitored session
    the broadcast runs with its local_init_op, so also each time the session
    is recreated after a failure: a rank that died and was restarted takes
    the survivors' variables (root_rank 0: the oldest rank's; see
    broadcast_variables)."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self._graph = None

    def begin(self):
        g = _fw.get_default_graph()
        if self.bcast_op is None or self._graph is not g:
            self.bcast_op = broadcast_global_variables(self.root_rank)
            self._graph = g

    def _local_init_op(self):
        # MonitoredTrainingSession runs this with its local_init_op, after
        # every session creation (recoveries included); see _make_session.
        self._in_local_init = True
        return self.bcast_op

    def after_create_session(self, session, coord):
        if not getattr(self, "_in_local_init", False):
            session.run(self.bcast_op)
