"""hvd.allreduce, hvd.broadcast, hvd.allgather: distflow's collective ops
(CollectiveReduce, CollectiveBcastSend/Recv, CollectiveGather) across every
rank of the job. Each call adds one op with the next instance key, so every
rank must make the same calls in the same order."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.horovod.tensorflow import basics as _basics

GROUP_KEY = 1
_SUPPORTED = (_dtypes.float32, _dtypes.float64, _dtypes.int32, _dtypes.int64)


class _ReduceOp:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"hvd.{self.name}"


Average = _ReduceOp("Average")
Sum = _ReduceOp("Sum")
Adasum = _ReduceOp("Adasum")


class Compression:
    """Horovod's gradient compression: `none`, or `fp16`, which sends
    float32/float64 tensors between the ranks as float16 and rounds the
    result to float16, as Horovod's cast to float16 and back does. distflow
    has no float16 dtype, so the cast happens inside the all-reduce
    (CollectiveReduce's compression="fp16"): compress() returns the tensor as
    it is and the all-reduce does the rest; the result keeps the tensor's
    dtype. Integer tensors are reduced uncompressed, as in Horovod."""

    class none:  # noqa: N801 (Horovod's name)
        wire = "none"

        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor

    class fp16:  # noqa: N801 (Horovod's name)
        wire = "fp16"

        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor


_next_instance = [1]


def _instance_keys(count=1):
    """The first of `count` fresh instance keys (the same on every rank that
    makes the same calls in the same order)."""
    first = _next_instance[0]
    _next_instance[0] += count
    return first


def _reduce_op(what, average, op):
    if average is not None and op is not None:
        raise ValueError(f"hvd.{what}: give average= or op=, not both")
    if op is None:
        op = Sum if average is False else Average
    if op is Adasum:
        raise NotImplementedError(f"hvd.{what}(op=hvd.Adasum) is not supported by distflow; use hvd.Average or "
                                  f"hvd.Sum")
    if op not in (Average, Sum):
        raise ValueError(f"hvd.{what}: op must be hvd.Average or hvd.Sum, not {op!r}")
    return op


def _check_compression(what, compression):
    """The CollectiveReduce compression attribute for `compression`."""
    if compression is Compression.none or compression is None:
        return "none"
    if compression is Compression.fp16:
        return "fp16"
    raise NotImplementedError(f"hvd.{what}(compression={compression!r}): distflow supports hvd.Compression.none "
                              f"and hvd.Compression.fp16")


def _tensor(what, tensor):
    t = _fw.convert_to_tensor(tensor)  # an IndexedSlices: its dense form
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"hvd.{what}: '{t.name}' is {t.dtype.name}; distflow's collectives take "
                        f"{', '.join(d.name for d in _SUPPORTED)}")
    return t


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None):
    """The sum (op=hvd.Sum) or mean (hvd.Average, the default) of `tensor`
    over every rank; every rank gets the same bytes. An IndexedSlices is
    reduced in its dense form."""
    state = _basics._check("allreduce")
    op = _reduce_op("allreduce", average, op)
    wire = _check_compression("allreduce", compression)
    t = _tensor("allreduce", tensor)
    if prescale_factor != 1.0:
        t = t * _fw.constant(prescale_factor, dtype=t.dtype)
    out = _raw.CollectiveReduce(input=t, group_size=state.size, group_key=GROUP_KEY, instance_key=_instance_keys(),
                                merge_op="Add", final_op="Div" if op is Average else "Id", compression=wire,
                                name=name or "HorovodAllreduce")
    if postscale_factor != 1.0:
        out = out * _fw.constant(postscale_factor, dtype=out.dtype)
    return out


def _static_shape(what, t):
    shape = t.shape
    if shape.ndims is None or not shape.is_fully_defined():
        raise ValueError(f"hvd.{what}: '{t.name}' has shape {shape}, not fully known when the graph is built; "
                         f"distflow's broadcast needs it (set_shape() or reshape it first)")
    return shape.as_list()


def broadcast(tensor, root_rank, name=None):
    """`tensor` of rank `root_rank`, on every rank (same dtype and shape,
    fully known, everywhere)."""
    state = _basics._check("broadcast")
    if not 0 <= int(root_rank) < state.size:
        raise ValueError(f"hvd.broadcast: root_rank {root_rank} is not a rank of the job (0..{state.size - 1})")
    t = _tensor("broadcast", tensor)
    shape = _static_shape("broadcast", t)
    attrs = dict(group_size=state.size, group_key=GROUP_KEY, instance_key=_instance_keys(), shape=shape,
                 name=name or "HorovodBroadcast")
    if state.size == 1:
        return _raw.Identity(input=t, name=name or "HorovodBroadcast")
    if state.rank == int(root_rank):
        return _raw.CollectiveBcastSend(input=t, **attrs)
    return _raw.CollectiveBcastRecv(T=t.dtype, **attrs)


def allgather(tensor, name=None):
    """Every rank's `tensor` concatenated along dimension 0 in rank order.
    Unlike Horovod's, every rank's tensor must have the same shape."""
    state = _basics._check("allgather")
    t = _tensor("allgather", tensor)
    return _raw.CollectiveGather(input=t, group_size=state.size, group_key=GROUP_KEY,
                                 instance_key=_instance_keys(), name=name or "HorovodAllgather")


def barrier(name=None):
    """An op that returns once every rank has run it (a CollectiveReduce of 1)."""
    state = _basics._check("barrier")
    return _raw.CollectiveReduce(input=_fw.constant(1, dtype=_dtypes.int32), group_size=state.size,
                                 group_key=GROUP_KEY, instance_key=_instance_keys(), merge_op="Add",
                                 final_op="Id", name=name or "HorovodBarrier").op
