"""The sparse ops and their gradients against PyTorch (Debian's
python3-torch) as the reference, in float64: each distflow result and each
gradient (tf.gradients, densified) is compared with the same computation in
torch and its autograd -- tf.gather with index_select, unsorted_segment_sum
with index_add, sparse_segment_sum/mean and embedding_lookup_sparse with
embedding_bag (offsets, per_sample_weights), embedding_lookup over a
partitioned table with F.embedding, gather_nd with advanced indexing and
scatter_nd with index_put_(accumulate=True)."""
import numpy as np
import pytest
import torch

import distflow.compat.v1 as tf

TOL = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _rng(seed):
    return np.random.RandomState(seed)


def _grad_of(out, params, weights):
    """d sum(weights * out) / d params, densified, from distflow."""
    (g,) = tf.gradients(tf.reduce_sum(out * weights), [params])
    return tf.convert_to_tensor(g)


def _torch_grad(fn, table, weights):
    t = torch.tensor(table, requires_grad=True)
    out = fn(t)
    (out * torch.tensor(weights)).sum().backward()
    return out.detach().numpy(), t.grad.numpy()


def test_gather_matches_index_select_values_and_gradients():
    rng = _rng(0)
    table = rng.randn(7, 3)
    ids = np.array([6, 0, 3, 6, 2, 0, 0])
    w = rng.randn(7, 3)
    p = tf.placeholder(tf.float64, [7, 3])
    out = tf.gather(p, ids)
    with tf.Session() as sess:
        got, grad = sess.run([out, _grad_of(out, p, w)], {p: table})
    want, want_grad = _torch_grad(lambda t: torch.index_select(t, 0, torch.tensor(ids)), table, w)
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(grad, want_grad, **TOL)


def test_unsorted_segment_sum_matches_index_add():
    rng = _rng(1)
    data = rng.randn(6, 2)
    seg = np.array([3, 0, 3, 1, 0, 3])
    w = rng.randn(4, 2)
    d = tf.placeholder(tf.float64, [6, 2])
    out = tf.unsorted_segment_sum(d, seg, 4)
    with tf.Session() as sess:
        got, grad = sess.run([out, _grad_of(out, d, w)], {d: data})
    want, want_grad = _torch_grad(
        lambda t: torch.zeros(4, 2, dtype=torch.float64).index_add(0, torch.tensor(seg), t), data, w)
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(grad, want_grad, **TOL)


# Three bags over a 9-row table: [4, 0, 4], [], [8, 1]; the empty bag is
# row 1 of the result (zeros, as both define it).
BAG_IDS = [[4, 0, 4], [], [8, 1]]
BAG_WEIGHTS = [[0.5, 2.0, -1.0], [], [1.5, 0.25]]


def _bags():
    flat = np.array([i for b in BAG_IDS for i in b], dtype=np.int64)
    segments = np.array([k for k, b in enumerate(BAG_IDS) for _ in b], dtype=np.int32)
    offsets = np.cumsum([0] + [len(b) for b in BAG_IDS[:-1]])
    weights = np.array([x for b in BAG_WEIGHTS for x in b])
    return flat, segments, offsets, weights


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_sparse_segment_reductions_match_embedding_bag(mode):
    rng = _rng(2)
    table = rng.randn(9, 4)
    flat, segments, offsets, _ = _bags()
    w = rng.randn(3, 4)
    p = tf.placeholder(tf.float64, [9, 4])
    fn = tf.sparse_segment_sum if mode == "sum" else tf.sparse_segment_mean
    out = fn(p, flat, segments)
    with tf.Session() as sess:
        got, grad = sess.run([out, _grad_of(out, p, w)], {p: table})
    want, want_grad = _torch_grad(
        lambda t: torch.nn.functional.embedding_bag(torch.tensor(flat), t, torch.tensor(offsets), mode=mode),
        table, w)
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(grad, want_grad, **TOL)


def _sparse_tensor(values):
    indices = [[k, j] for k, b in enumerate(BAG_IDS) for j in range(len(b))]
    return tf.SparseTensor(indices, values, [len(BAG_IDS), 3])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse_matches_embedding_bag(combiner, weighted):
    rng = _rng(3)
    table = rng.randn(9, 4)
    flat, _, offsets, weights = _bags()
    if not weighted:
        weights = np.ones_like(weights)
    w = rng.randn(3, 4)
    p = tf.placeholder(tf.float64, [9, 4])
    sp_ids = _sparse_tensor(flat)
    sp_weights = _sparse_tensor(weights) if weighted else None
    out = tf.nn.embedding_lookup_sparse(p, sp_ids, sp_weights, combiner=combiner)
    with tf.Session() as sess:
        got, grad = sess.run([out, _grad_of(out, p, w)], {p: table})

    def reference(t):
        # embedding_bag's weighted sum, divided as the combiner says.
        total = torch.nn.functional.embedding_bag(torch.tensor(flat), t, torch.tensor(offsets), mode="sum",
                                                  per_sample_weights=torch.tensor(weights))
        if combiner == "sum":
            return total
        wt = torch.tensor(weights)
        norm = torch.stack([(wt[o:o + len(b)] ** (1 if combiner == "mean" else 2)).sum()
                            for o, b in zip(offsets, BAG_IDS)])
        if combiner == "sqrtn":
            norm = norm.sqrt()
        if not weighted:  # TF's sparse_segment_mean / sqrt_n: an empty bag is zeros
            norm = norm.clamp(min=1)
        return total / norm[:, None]

    want, want_grad = _torch_grad(reference, table, w)
    # The empty bag in the middle: zeros without weights, 0 / 0 with a
    # weighted mean or sqrtn (as TF's embedding_lookup_sparse gives).
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], **TOL)
    assert np.array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(grad, np.nan_to_num(want_grad), **TOL)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_over_a_partitioned_table_matches_embedding(strategy):
    rng = _rng(4)
    table = rng.randn(11, 3)
    ids = np.array([[10, 0, 5], [3, 3, 7]])
    w = rng.randn(2, 3, 3)
    n = 3
    if strategy == "div":  # fixed_size_partitioner's layout: contiguous rows, the first 11 % 3 one longer
        pv = tf.get_variable("table", [11, 3], initializer=table, partitioner=tf.fixed_size_partitioner(n),
                             dtype=tf.float64)
        parts = list(pv)
    else:  # row r in part r % 3 at r // 3
        parts = [tf.Variable(table[k::n], name=f"table_{k}") for k in range(n)]
    out = tf.nn.embedding_lookup(parts, ids, partition_strategy=strategy)
    grads = tf.gradients(tf.reduce_sum(out * w), parts)
    assert all(isinstance(g, tf.IndexedSlices) for g in grads)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, dense = sess.run([out, [tf.convert_to_tensor(g) for g in grads]])
    want, want_grad = _torch_grad(lambda t: torch.nn.functional.embedding(torch.tensor(ids), t), table, w)
    np.testing.assert_allclose(got, want, **TOL)
    if strategy == "div":
        np.testing.assert_allclose(np.concatenate(dense), want_grad, **TOL)
    else:
        for k in range(n):
            np.testing.assert_allclose(dense[k], want_grad[k::n], **TOL)


def _clip_rows(rows, max_norm):
    """TF's clip_by_norm over the last axis, in NumPy."""
    norm = np.sqrt((rows ** 2).sum(-1, keepdims=True))
    return rows * max_norm / np.maximum(norm, max_norm)


@pytest.mark.parametrize("parts", [1, 3])
def test_embedding_lookup_max_norm_matches_numpy_and_torch(parts):
    # TF clips the looked-up rows (the table is unchanged); torch's
    # F.embedding(max_norm) renormalises the table's rows in place, to
    # max_norm / (norm + 1e-7): the returned rows agree to about 1e-7.
    rng = _rng(6)
    table = rng.randn(9, 4) * 1.5
    table[0] *= 0.1  # one row inside the bound, left as it is
    ids = np.array([[4, 0], [8, 4]])
    max_norm = 1.5
    pv = tf.get_variable("table", [9, 4], initializer=table, dtype=tf.float64,
                         partitioner=tf.fixed_size_partitioner(parts) if parts > 1 else None)
    out = tf.nn.embedding_lookup(pv, ids, partition_strategy="div", max_norm=max_norm)
    sp_out = tf.nn.embedding_lookup_sparse(pv, _sparse_tensor(_bags()[0]), _sparse_tensor(_bags()[3]),
                                           partition_strategy="div", combiner="sum", max_norm=max_norm)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, got_sparse, after = sess.run([out, sp_out, tf.convert_to_tensor(pv)])
    want = _clip_rows(table[ids], max_norm)
    assert np.linalg.norm(table[ids], axis=-1).max() > max_norm  # the bound bites
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(got[0, 1], table[0], **TOL)  # within the bound: unchanged
    np.testing.assert_array_equal(after, table)  # the table is not renormalised
    flat, _, offsets, weights = _bags()
    want_sparse = np.stack([sum((w * _clip_rows(table[i], max_norm) for i, w in zip(b, bw)), np.zeros(4))
                            for b, bw in zip(BAG_IDS, BAG_WEIGHTS)])
    np.testing.assert_allclose(got_sparse, want_sparse, **TOL)
    t = torch.tensor(table.copy())
    torch_rows = torch.nn.functional.embedding(torch.tensor(ids), t, max_norm=max_norm).numpy()
    np.testing.assert_allclose(got, torch_rows, rtol=1e-6, atol=1e-9)
    torch_bags = torch.nn.functional.embedding_bag(torch.tensor(flat), torch.tensor(table.copy()),
                                                   torch.tensor(offsets), mode="sum", max_norm=max_norm,
                                                   per_sample_weights=torch.tensor(weights)).numpy()
    np.testing.assert_allclose(got_sparse, torch_bags, rtol=1e-6, atol=1e-9)


def test_gather_nd_and_scatter_nd_match_advanced_indexing():
    rng = _rng(5)
    params = rng.randn(4, 3, 2)
    elems = np.array([[3, 2, 1], [0, 0, 0], [3, 2, 1]])
    rows = np.array([[[2, 1]], [[0, 2]]])  # [2, 1, 2]: slices of 2 elements
    w_e, w_r = rng.randn(3), rng.randn(2, 1, 2)
    p = tf.placeholder(tf.float64, [4, 3, 2])
    out_e, out_r = tf.gather_nd(p, elems), tf.gather_nd(p, rows)
    assert out_r.shape.as_list() == [2, 1, 2]
    updates = rng.randn(3, 2)
    where = np.array([[1, 2], [0, 0], [1, 2]])
    u = tf.placeholder(tf.float64, [3, 2])
    scattered = tf.scatter_nd(where, u, [2, 3, 2])
    with tf.Session() as sess:
        got_e, got_r, g_e, g_r, got_s, g_s = sess.run(
            [out_e, out_r, _grad_of(out_e, p, w_e), _grad_of(out_r, p, w_r), scattered,
             _grad_of(scattered, u, np.arange(12.0).reshape(2, 3, 2))], {p: params, u: updates})
    want_e, want_ge = _torch_grad(lambda t: t[tuple(torch.tensor(elems).T)], params, w_e)
    want_r, want_gr = _torch_grad(lambda t: t[torch.tensor(rows[..., 0]), torch.tensor(rows[..., 1])], params, w_r)
    np.testing.assert_allclose(got_e, want_e, **TOL)
    np.testing.assert_allclose(g_e, want_ge, **TOL)  # the repeated tuple's gradient adds up
    np.testing.assert_allclose(got_r, want_r, **TOL)
    np.testing.assert_allclose(g_r, want_gr, **TOL)
    want_s, want_gs = _torch_grad(
        lambda t: torch.zeros(2, 3, 2, dtype=torch.float64).index_put(tuple(torch.tensor(where).T), t,
                                                                      accumulate=True),
        updates, np.arange(12.0).reshape(2, 3, 2))
    np.testing.assert_allclose(got_s, want_s, **TOL)
    np.testing.assert_allclose(g_s, want_gs, **TOL)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"GatherNd.*index tuple 0 = \[4, 0\]"):
            sess.run(tf.gather_nd(p, [[4, 0]]), {p: params})
