"""hvd.allreduce, hvd.broadcast, hvd.allgather: distflow's collective ops
(CollectiveReduce, CollectiveBcastSend/Recv, CollectiveGather) across every
rank of the job, or of a process set (process_set=; process_sets.py). Each
call adds one op with the next instance key of its set, so every member
must make the same calls in the same order. op=hvd.Adasum is Horovod's
adaptive summation (CollectiveReduce merge_op="Adasum"; docs/COLLECTIVES.md).
With HOROVOD_CYCLE_TIME set, the hvd.allreduce ops of one step that become
ready within one cycle are reduced together at run time (fusion.py).
In elastic mode the ops run in the elastic group (group_size 0): their size
is the group's at run time, so one graph serves every size the job takes."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.horovod.tensorflow import basics as _basics
from distflow.horovod.tensorflow import fusion as _fusion
from distflow.horovod.tensorflow import process_sets as _sets

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


_next_instance = {}  # process set id -> its next instance key


def _instance_keys(count=1, set_id=0):
    """The first of `count` fresh instance keys of process set `set_id` (the
    same on every member that makes the same calls in the same order)."""
    first = _next_instance.get(set_id, 1)
    _next_instance[set_id] = first + count
    return first


def _group_attrs(what, process_set, count=1):
    """The attributes every collective op of `process_set` takes, and this
    rank's rank in it."""
    size, key, members, rank, set_id = _sets._group(what, process_set)
    attrs = dict(group_size=size, group_key=GROUP_KEY if key is None else key,
                 instance_key=_instance_keys(count, set_id))
    if members:
        attrs["group_members"] = members
    return attrs, rank


def _reduce_op(what, average, op):
    if average is not None and op is not None:
        raise ValueError(f"hvd.{what}: give average= or op=, not both")
    if op is None:
        op = Sum if average is False else Average
    if op not in (Average, Sum, Adasum):
        raise ValueError(f"hvd.{what}: op must be hvd.Average, hvd.Sum or hvd.Adasum, not {op!r}")
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
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=None):
    """The sum (op=hvd.Sum), mean (hvd.Average, the default) or Adasum
    (hvd.Adasum: float32/float64 only, uncompressed) of `tensor` over every
    rank of `process_set` (default: all); every member gets the same bytes.
    An IndexedSlices is reduced in its dense form."""
    _basics._check("allreduce")
    op = _reduce_op("allreduce", average, op)
    wire = _check_compression("allreduce", compression)
    t = _tensor("allreduce", tensor)
    if op is Adasum:
        if t.dtype not in (_dtypes.float32, _dtypes.float64):
            raise TypeError(f"hvd.allreduce(op=hvd.Adasum): '{t.name}' is {t.dtype.name}; Adasum reduces float32 "
                            f"and float64 tensors")
        if wire != "none":
            raise NotImplementedError("hvd.allreduce(op=hvd.Adasum, compression=hvd.Compression.fp16): Adasum runs "
                                      "uncompressed; use Compression.none")
    attrs, _ = _group_attrs("allreduce", process_set)
    attrs.update(_fusion.allreduce_attrs(attrs["group_size"], op is Adasum))
    if prescale_factor != 1.0:
        t = t * _fw.constant(prescale_factor, dtype=t.dtype)
    merge, final = ("Adasum", "Id") if op is Adasum else ("Add", "Div" if op is Average else "Id")
    out = _raw.CollectiveReduce(input=t, merge_op=merge, final_op=final, compression=wire,
                                name=name or "HorovodAllreduce", **attrs)
    if postscale_factor != 1.0:
        out = out * _fw.constant(postscale_factor, dtype=out.dtype)
    return out


def _static_shape(what, t):
    shape = t.shape
    if shape.ndims is None or not shape.is_fully_defined():
        raise ValueError(f"hvd.{what}: '{t.name}' has shape {shape}, not fully known when the graph is built; "
                         f"distflow's broadcast needs it (set_shape() or reshape it first)")
    return shape.as_list()


def check_root_rank(what, root_rank, size):
    """ValueError naming `root_rank` and the job's size unless it is a rank."""
    if not 0 <= int(root_rank) < size:
        raise ValueError(f"hvd.{what}: root_rank {root_rank} is not a rank of the job: its size is {size} (ranks "
                         f"0..{size - 1})")


def root_attrs(root_rank):
    """CollectiveBcastSend's sender when every rank runs it: root 0 is the
    group's root (rank 0, or after a rebuild the oldest rank, whose state is
    the newest); any other root is that rank of the group (of its last build
    in an elastic job), as Horovod's fixed root_rank."""
    return {"from_group_root": True} if int(root_rank) == 0 else {"root_rank": int(root_rank)}


def broadcast(tensor, root_rank, name=None, process_set=None):
    """`tensor` of rank `root_rank`, on every rank of `process_set` (default:
    all; root_rank is a rank of the job, and a member of the set), with the
    same dtype and shape, fully known, everywhere. In an elastic job
    root_rank is a rank of the group as it is when the op runs."""
    state = _basics._check("broadcast")
    check_root_rank("broadcast", root_rank, state.size)
    if process_set is not None and process_set is not _sets.global_process_set and \
            isinstance(process_set, _sets.ProcessSet) and int(root_rank) not in process_set.ranks:
        raise ValueError(f"hvd.broadcast: root_rank {root_rank} is not in process set {process_set.ranks}")
    t = _tensor("broadcast", tensor)
    shape = _static_shape("broadcast", t)
    attrs, _ = _group_attrs("broadcast", process_set)
    attrs.update(shape=shape, name=name or "HorovodBroadcast")
    if state.elastic:  # every rank runs the op; rank root_rank of the group's last build sends
        return _raw.CollectiveBcastSend(input=t, **root_attrs(root_rank), **attrs)
    if attrs["group_size"] == 1:
        return _raw.Identity(input=t, name=name or "HorovodBroadcast")
    if state.rank == int(root_rank):
        return _raw.CollectiveBcastSend(input=t, **attrs)
    return _raw.CollectiveBcastRecv(T=t.dtype, **attrs)


def allgather(tensor, name=None, process_set=None):
    """Every member's `tensor` concatenated along dimension 0 in rank order
    (of `process_set`; default: all ranks). As in Horovod, the first
    dimension may differ per rank (the result's is unknown until it runs);
    the dtype and the other dimensions must match, else the op fails with an
    InvalidArgumentError naming both ranks and their shapes."""
    _basics._check("allgather")
    t = _tensor("allgather", tensor)
    attrs, _ = _group_attrs("allgather", process_set)
    return _raw.CollectiveGather(input=t, name=name or "HorovodAllgather", **attrs)


def barrier(name=None, process_set=None):
    """An op that returns once every rank (of `process_set`) has run it (a
    CollectiveReduce of 1)."""
    _basics._check("barrier")
    attrs, _ = _group_attrs("barrier", process_set)
    return _raw.CollectiveReduce(input=_fw.constant(1, dtype=_dtypes.int32), merge_op="Add", final_op="Id",
                                 name=name or "HorovodBarrier", **attrs).op
