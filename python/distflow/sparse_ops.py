"""TensorFlow 1.x's functions of sparse models: tf.gather, tf.scatter_add /
scatter_sub / scatter_update, tf.unique, tf.unsorted_segment_sum,
tf.dynamic_partition / dynamic_stitch, tf.sparse_segment_sum / mean,
tf.IndexedSlices, tf.gather_nd / scatter_nd, and tf.nn.embedding_lookup
(over one table or its shards: a list or a PartitionedVariable,
partition_strategy "mod" or "div") and embedding_lookup_sparse (bags of
ids, a tf.SparseTensor, combined by "sum", "mean" or "sqrtn").

The gradient of a lookup is an IndexedSlices: only the looked-up rows. In
the graph it is one dense tensor (a marked UnsortedSegmentSum, see
distflow/gradients.h) that a dense consumer uses as is and an optimizer
reads as its parts, applying a sparse update on the variable's task."""
import collections as _collections
import contextlib as _contextlib

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw

convert_to_tensor = _fw.convert_to_tensor


class IndexedSlices:
    """tf.IndexedSlices: row values[i] of a tensor of shape dense_shape is
    at row indices[i] (duplicates add up). convert_to_tensor densifies it."""

    def __init__(self, values, indices, dense_shape=None, _dense=None):
        self.values = values
        self.indices = indices
        self._dense_shape = dense_shape
        self._dense = _dense

    dtype = property(lambda self: self.values.dtype)
    graph = property(lambda self: self.values.graph)
    name = property(lambda self: self.values.name)
    device = property(lambda self: self.values.device)

    @property
    def op(self):
        return self.values.op

    @property
    def dense_shape(self):
        if self._dense_shape is None and self._dense is not None:
            self._dense_shape = _raw.Shape(self._dense, out_type=_dtypes.int64)
        return self._dense_shape

    def _as_dense_tensor(self):
        if self._dense is None:
            if self._dense_shape is None:
                raise ValueError("IndexedSlices without dense_shape cannot be converted to a dense Tensor")
            g = _fw.get_default_graph()
            shape = convert_to_tensor(self._dense_shape)
            rows = _raw.Reshape(_raw.Slice(shape, _fw.constant([0], dtype=shape.dtype),
                                           _fw.constant([1], dtype=shape.dtype)), _fw.constant([], dtype=_dtypes.int32))
            out = _distflow.indexed_slices_gradient(g._scope(), convert_to_tensor(self.values)._out,
                                                    convert_to_tensor(self.indices)._out, rows._out)
            self._dense = _fw.Tensor(out, g)
        return self._dense

    @property
    def _out(self):  # what optimizers and ops hand to C++: the marked dense form
        return self._as_dense_tensor()._out

    def __repr__(self):
        return f"IndexedSlices(indices={self.indices}, values={self.values}, dense_shape={self._dense_shape})"


def _wrap_gradient(cc_output, g):
    """A gradient from C++ as TF returns it: an IndexedSlices for a sparse one."""
    parts = _distflow.as_indexed_slices(cc_output)
    dense = _fw.Tensor(cc_output, g)
    if parts is None:
        return dense
    values, indices, _ = parts
    return IndexedSlices(_fw.Tensor(values, g), _fw.Tensor(indices, g), None, _dense=dense)


def _ids(x, what="indices"):
    t = convert_to_tensor(x)
    if t.dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"{what} must be int32 or int64, got {t.dtype.name} ('{t.name}')")
    return t


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    if batch_dims != 0:
        raise NotImplementedError("tf.gather(batch_dims != 0)")
    indices = _ids(indices)
    if axis is None or (isinstance(axis, int) and axis == 0):
        return _raw.Gather(params, indices, name=name)
    return _raw.GatherV2(params, indices, axis, name=name)


def gather_nd(params, indices, name=None, batch_dims=0):
    """tf.gather_nd: the slices of params at the index tuples (the last
    dimension of indices); its gradient is a ScatterNd (dense)."""
    if batch_dims != 0:
        raise NotImplementedError("tf.gather_nd(batch_dims != 0)")
    return _raw.GatherNd(params, _ids(indices), name=name)


def scatter_nd(indices, updates, shape, name=None):
    """tf.scatter_nd: zeros of `shape` with each row of updates added at its
    index tuple (duplicates add up)."""
    indices = _ids(indices)
    return _raw.ScatterNd(indices, updates, convert_to_tensor(shape, dtype=indices.dtype), name=name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    return _raw.ScatterAdd(ref, _ids(indices), convert_to_tensor(updates, dtype=ref.dtype), name=name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    return _raw.ScatterSub(ref, _ids(indices), convert_to_tensor(updates, dtype=ref.dtype), name=name)


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    return _raw.ScatterUpdate(ref, _ids(indices), convert_to_tensor(updates, dtype=ref.dtype), name=name)


def scatter_nd_update(ref, indices, updates, use_locking=True, name=None):
    """tf.scatter_nd_update: the slices of updates assigned into the variable
    at their index tuples, in place (of duplicate tuples the last wins)."""
    return _raw.ScatterNdUpdate(ref, _ids(indices), convert_to_tensor(updates, dtype=ref.dtype),
                                use_locking=use_locking, name=name)


def scatter_nd_add(ref, indices, updates, use_locking=False, name=None):
    """tf.scatter_nd_add: the slices of updates added into the variable at
    their index tuples, in place (duplicates add up)."""
    return _raw.ScatterNdAdd(ref, _ids(indices), convert_to_tensor(updates, dtype=ref.dtype),
                             use_locking=use_locking, name=name)


def tensor_scatter_update(tensor, indices, updates, name=None):
    """tf.tensor_scatter_nd_update (TF1: tf.tensor_scatter_update): a copy of
    tensor with the slices of updates assigned at their index tuples (of
    duplicate tuples the last wins, and only it gets a gradient)."""
    tensor = convert_to_tensor(tensor)
    return _raw.TensorScatterUpdate(tensor, _ids(indices), convert_to_tensor(updates, dtype=tensor.dtype),
                                    name=name)


tensor_scatter_nd_update = tensor_scatter_update


UniqueOutput = _collections.namedtuple("Unique", ["y", "idx"])


def unique(x, out_idx=_dtypes.int32, name=None):
    y, idx = _raw.Unique(x, out_idx=_dtypes.as_dtype(out_idx), name=name)
    return UniqueOutput(y, idx)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    return _raw.UnsortedSegmentSum(data, _ids(segment_ids, "segment_ids"), num_segments, name=name)


def dynamic_partition(data, partitions, num_partitions, name=None):
    out = _raw.DynamicPartition(data, partitions, num_partitions=num_partitions, name=name)
    return list(out) if isinstance(out, tuple) else [out]


def dynamic_stitch(indices, data, name=None):
    indices, data = list(indices), list(data)
    if len(indices) != len(data):
        raise ValueError(f"dynamic_stitch: {len(indices)} index tensors but {len(data)} data tensors")
    return _raw.DynamicStitch(indices, data, N=len(indices), name=name)


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None):
    if num_segments is not None:
        raise NotImplementedError("tf.sparse_segment_sum(num_segments=...)")
    return _raw.SparseSegmentSum(data, _ids(indices), segment_ids, name=name)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None):
    if num_segments is not None:
        raise NotImplementedError("tf.sparse_segment_mean(num_segments=...)")
    return _raw.SparseSegmentMean(data, _ids(indices), segment_ids, name=name)


@_contextlib.contextmanager
def _colocate(var):
    """Ops built here run where `var` lives (TF's colocate_with), so a
    lookup sends ids to the variable's task and only rows come back."""
    dev = getattr(var, "device", "")
    if dev:
        with _fw.device(dev):
            yield
    else:
        yield


def _int_mod(x, n):
    return x - _raw.Div(x, n) * n


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None):
    """Rows `ids` of a table, or of a table sharded over `params` (a list or
    a PartitionedVariable): each id goes only to the shard holding it, the
    Gather runs on that shard's device, and the rows are stitched back in
    order. "mod": id i is row i // n of shard i % n; "div": contiguous
    ranges, the first (rows % n) shards one row longer. max_norm: each
    looked-up row whose L2 norm exceeds it is scaled down to it (TF's
    clip_by_norm over the row's axes; the table itself is not changed)."""
    if max_norm is None:
        return _embedding_lookup(params, ids, partition_strategy, name)
    ids = _ids(ids, "ids")
    if ids.shape.ndims is None:
        raise ValueError("embedding_lookup(max_norm=...) needs the rank of ids")
    rows = _embedding_lookup(params, ids, partition_strategy, None)
    if rows.shape.ndims is None:
        raise ValueError("embedding_lookup(max_norm=...) needs the rank of params")
    from distflow.math_ops import clip_by_norm
    return clip_by_norm(rows, max_norm, axes=list(range(ids.shape.ndims, rows.shape.ndims)), name=name)


def _embedding_lookup(params, ids, partition_strategy, name):
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"embedding_lookup: unknown partition_strategy '{partition_strategy}' (use 'mod' or 'div')")
    params = list(params) if isinstance(params, (list, tuple)) or hasattr(params, "_get_variable_list") else [params]
    if hasattr(params[0], "_get_variable_list") and len(params) == 1:
        params = list(params[0]._get_variable_list())
    if not params:
        raise ValueError("embedding_lookup: params is empty")
    ids = _ids(ids, "ids")
    n = len(params)
    if n == 1:
        with _colocate(params[0]):
            return _raw.Gather(params[0], ids, name=name)
    if partition_strategy == "div":
        rows = [p.shape.as_list()[0] if p.shape.ndims else None for p in params]
        if any(r is None for r in rows):
            raise ValueError("embedding_lookup(partition_strategy='div') needs every shard's number of rows")
    else:
        rows = None

    def assign_and_new_ids(flat):
        """(the shard of each id, its row in that shard)."""
        if partition_strategy == "mod":
            nn = _fw.constant(n, dtype=ids.dtype)
            return _int_mod(flat, nn), _raw.Div(flat, nn)
        total = sum(rows)
        per, extras = total // n, total % n
        c = lambda v: _fw.constant(v, dtype=ids.dtype)  # noqa: E731
        big = _raw.Div(flat, c(per + 1))
        assign = _raw.Maximum(big, _raw.Div(flat - c(extras), c(max(per, 1))))
        in_first = _raw.Less(assign, c(extras))
        new_ids = _raw.Select(in_first, _int_mod(flat, c(per + 1)), _int_mod(flat - c(extras), c(max(per, 1))))
        return assign, new_ids

    def as_int32(assign):
        return _raw.Cast(assign, DstT=_dtypes.int32) if assign.dtype != _dtypes.int32 else assign

    flat = _raw.Reshape(ids, _fw.constant([-1]))
    assign, _ = assign_and_new_ids(flat)
    positions = dynamic_partition(_raw.Range(_fw.constant(0), _raw.Size(flat), _fw.constant(1)), as_int32(assign), n)
    parts = []
    for i, p in enumerate(params):
        with _colocate(p):
            # Each shard works out its own rows from the ids where it lives:
            # the ids reach it once (with the step when they are fed), and
            # the gradient's indices are already there for the update.
            shard_assign, shard_ids = assign_and_new_ids(_raw.Reshape(ids, _fw.constant([-1])))
            pid = dynamic_partition(shard_ids, as_int32(shard_assign), n)[i]
            parts.append(_raw.Gather(p, pid))
    stitched = dynamic_stitch(positions, parts)
    # ids.shape + the row shape, static where it is known (as TF's set_shape).
    ids_dims = ids.shape.as_list() if ids.shape.ndims is not None else None
    row = params[0].shape.as_list()[1:] if params[0].shape.ndims else None
    if ids_dims is not None and row is not None and None not in row and ids_dims.count(None) <= 1:
        return _raw.Reshape(stitched, _fw.constant([-1 if d is None else d for d in ids_dims] + row), name=name)
    row_shape = _raw.Slice(_raw.Shape(stitched), _fw.constant([1]), _fw.constant([-1]))
    return _raw.Reshape(stitched, _raw.Concat([_raw.Shape(ids), row_shape], _fw.constant(0)), name=name)


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None, combiner=None,
                            max_norm=None):
    """tf.nn.embedding_lookup_sparse: one combined row per bag. sp_ids is a
    tf.SparseTensor of ids, [batch, max ids per bag] (row i's ids are bag
    i); sp_weights a SparseTensor of the same indices with a weight per id,
    or None (every weight 1). combiner "sum", "mean" (the default) or
    "sqrtn": the weighted sum of the bag's rows, divided by the sum of its
    weights or by the square root of the sum of their squares (without
    weights an empty bag is zeros; with weights 0 / 0, as in TF). Each distinct
    id is looked up once (embedding_lookup over the shards of params), so
    only those rows cross the network; the gradient of params is an
    IndexedSlices of those rows. max_norm clips each looked-up row to that
    L2 norm before the rows are combined, as TF."""
    combiner = "mean" if combiner is None else combiner
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(f"embedding_lookup_sparse: combiner must be 'sum', 'mean' or 'sqrtn', got '{combiner}'")
    from distflow.parsing_ops import SparseTensor
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"embedding_lookup_sparse: sp_ids must be a tf.SparseTensor, not {type(sp_ids).__name__}")
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError(f"embedding_lookup_sparse: sp_weights must be a tf.SparseTensor or None, not "
                        f"{type(sp_weights).__name__}")
    with _fw.name_scope(name or "embedding_lookup_sparse"):
        # Bag of each id: the first coordinate of its index.
        segment_ids = _raw.Cast(_raw.Reshape(_raw.Slice(sp_ids.indices, _fw.constant([0, 0], dtype=_dtypes.int64),
                                                        _fw.constant([-1, 1], dtype=_dtypes.int64)),
                                             _fw.constant([-1])), DstT=_dtypes.int32)
        ids, idx = unique(_ids(sp_ids.values, "sp_ids.values"))
        embeddings = embedding_lookup(params, ids, partition_strategy=partition_strategy, max_norm=max_norm)
        num_bags = _raw.Add(_raw.Max(segment_ids, _fw.constant([0])), _fw.constant(1))
        rank = embeddings.shape.ndims
        if rank is None:
            raise ValueError("embedding_lookup_sparse needs the rank of params")
        column = _fw.constant([-1] + [1] * (rank - 1))
        if sp_weights is None:
            if combiner == "sum":
                return sparse_segment_sum(embeddings, idx, segment_ids)
            if combiner == "mean":
                return sparse_segment_mean(embeddings, idx, segment_ids)
            # sqrtn (TF's sparse_segment_sqrt_n): an empty bag is zeros.
            ones = _raw.Cast(_raw.OnesLike(segment_ids), DstT=embeddings.dtype)
            count = unsorted_segment_sum(ones, segment_ids, num_bags)
            norm = _raw.Sqrt(_raw.Maximum(count, _raw.OnesLike(count)))
            return _raw.Div(sparse_segment_sum(embeddings, idx, segment_ids), _raw.Reshape(norm, column))
        weights = convert_to_tensor(sp_weights.values)
        if weights.dtype != embeddings.dtype:
            weights = _raw.Cast(weights, DstT=embeddings.dtype)
        rows = _raw.Gather(embeddings, idx)
        w = _raw.Reshape(weights, column)
        total = unsorted_segment_sum(_raw.Mul(rows, w), segment_ids, num_bags)
        if combiner == "sum":
            return total
        if combiner == "mean":
            norm = unsorted_segment_sum(weights, segment_ids, num_bags)
        else:
            norm = _raw.Sqrt(unsorted_segment_sum(_raw.Mul(weights, weights), segment_ids, num_bags))
        # As TF: a weighted bag with no ids in the middle of the batch is 0 / 0.
        return _raw.Div(total, _raw.Reshape(norm, column))
