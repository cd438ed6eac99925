"""tf.scatter_nd_update, tf.scatter_nd_add and tf.tensor_scatter_update
(tf.tensor_scatter_nd_update) against NumPy: values (the last of duplicate
tuples wins an update; an add sums them), tensor_scatter_update's gradients
(for updates: only the update written last at a tuple gets one), and a tuple
out of range reported naming the op, the tuple and the bound, with the
variable left as it was."""
import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def numpy_update(base, indices, updates, add):
    out = base.copy()
    k = indices.shape[-1]
    flat_idx = indices.reshape(-1, k)
    flat_upd = updates.reshape((flat_idx.shape[0],) + base.shape[k:])
    for t, u in zip(flat_idx, flat_upd):
        if add:
            out[tuple(t)] += u
        else:
            out[tuple(t)] = u
    return out


def test_scatter_nd_update_and_add_on_variables_match_numpy():
    rng = np.random.RandomState(0)
    base = rng.randn(4, 3, 2).astype(np.float32)
    rows = np.array([[2], [0], [2]], dtype=np.int64)  # row 2 twice: the last wins
    rows_upd = rng.randn(3, 3, 2).astype(np.float32)
    elems = np.array([[1, 2], [3, 0], [1, 2]], dtype=np.int32)
    elems_upd = rng.randn(3, 2).astype(np.float32)
    v = tf.Variable(base)
    w = tf.Variable(base)
    update = tf.scatter_nd_update(v, rows, rows_upd)
    add = tf.scatter_nd_add(w, elems, elems_upd)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_update, got_add = sess.run([update, add])
        np.testing.assert_array_equal(got_update, numpy_update(base, rows, rows_upd, add=False))
        np.testing.assert_allclose(got_add, numpy_update(base, elems, elems_upd, add=True), rtol=1e-6)
        np.testing.assert_array_equal(sess.run(v), got_update)  # in place


def test_tensor_scatter_update_matches_numpy_and_its_gradients():
    rng = np.random.RandomState(1)
    base = rng.randn(5, 2)
    indices = np.array([[4], [1], [4]], dtype=np.int32)  # updates[0] is overwritten by updates[2]
    updates = rng.randn(3, 2)
    t = tf.constant(base)
    u = tf.constant(updates)
    out = tf.tensor_scatter_update(t, indices, u)
    assert tf.tensor_scatter_nd_update is tf.tensor_scatter_update
    weights = rng.randn(5, 2)
    loss = tf.reduce_sum(out * weights)
    grad_t, grad_u = tf.gradients(loss, [t, u])
    with tf.Session() as sess:
        got, gt, gu = sess.run([out, grad_t, grad_u])
    np.testing.assert_array_equal(got, numpy_update(base, indices, updates, add=False))
    want_t = weights.copy()
    want_t[[4, 1]] = 0
    np.testing.assert_allclose(gt, want_t)
    np.testing.assert_allclose(gu, [np.zeros(2), weights[1], weights[4]])


def test_a_tuple_out_of_range_names_the_op_the_tuple_and_the_bound():
    base = np.arange(6, dtype=np.float32).reshape(3, 2)
    v = tf.Variable(base)
    bad = tf.scatter_nd_update(v, [[0, 1], [3, 0]], [1.0, 2.0], name="write")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"ScatterNdUpdate \(node 'write'\).*index tuple 1 = \[3, 0\] is out of bounds: "
                                 r"entry 0 is not in \[0, 3\)"):
            sess.run(bad)
        np.testing.assert_array_equal(sess.run(v), base)
