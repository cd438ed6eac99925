"""Graph functions: Python callables traced into FunctionDefs and run by
Call nodes in a sub-executor (results against NumPy, gradients through
calls checked numerically), on a remote task of an in-process cluster, and
as Dataset.map/filter functions run by the runtime per element."""
import numpy as np
import pytest

import distflow
import distflow.compat.v1 as tf
from distflow.function import Defun


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_defun_call_matches_numpy_and_is_reused():
    @Defun(tf.float64, tf.float64)
    def f(x, y):
        return x * x * y + tf.sin(y), tf.reduce_sum(x)

    xv, yv = np.array([1.0, 2.0, -0.5]), np.array([3.0, 4.0, 0.25])
    x, y = tf.constant(xv), tf.constant(yv)
    z, total = f(x, y)
    z2, _ = f(y, x)  # the same function, called twice
    assert z.dtype == tf.float64 and total.dtype == tf.float64
    with tf.Session() as sess:
        zv, tv, z2v = sess.run([z, total, z2])
    np.testing.assert_allclose(zv, xv * xv * yv + np.sin(yv))
    np.testing.assert_allclose(z2v, yv * yv * xv + np.sin(xv))
    assert tv == pytest.approx(xv.sum())


def numeric_gradient(sess, y, x, xv, feed, eps=1e-6):
    grad = np.zeros_like(xv)
    for i in np.ndindex(xv.shape):
        plus, minus = xv.copy(), xv.copy()
        plus[i] += eps
        minus[i] -= eps
        grad[i] = (sess.run(y, {**feed, x: plus}) - sess.run(y, {**feed, x: minus})) / (2 * eps)
    return grad


def test_gradients_through_calls_are_numerically_right():
    @Defun(tf.float64, tf.float64)
    def layer(x, w):
        return tf.tanh(tf.matmul(x, w))

    @Defun(tf.float64)
    def unused_arg_and_int(x):
        return x * 3.0

    rng = np.random.RandomState(0)
    xv, wv = rng.randn(2, 3), rng.randn(3, 2)
    x, w = tf.placeholder(tf.float64, [2, 3]), tf.placeholder(tf.float64, [3, 2])
    h = layer(x, w)
    loss = tf.reduce_sum(tf.square(layer(h, tf.constant(rng.randn(2, 2)))) * unused_arg_and_int(h))
    gx, gw = tf.gradients(loss, [x, w])
    feed = {x: xv, w: wv}
    with tf.Session() as sess:
        gxv, gwv = sess.run([gx, gw], feed)
        np.testing.assert_allclose(gxv, numeric_gradient(sess, loss, x, xv, {w: wv}), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(gwv, numeric_gradient(sess, loss, w, wv, {x: xv}), rtol=1e-5, atol=1e-7)


def test_a_call_runs_on_a_remote_task_with_its_function():
    jobs = distflow._distflow.local_cluster_spec(2, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [tf.train.Server(cluster, job_name=j, task_index=i)
               for j in ("ps", "worker") for i in range(cluster.num_tasks(j))]

    @Defun(tf.float32)
    def double_plus_one(x):
        return 2.0 * x + 1.0

    with tf.device("/job:ps/task:1"):
        y = double_plus_one(tf.constant([1.0, 5.0]))
        ds = tf.data.Dataset.range(4).map(lambda v: v * v)
        nxt = ds.make_one_shot_iterator().get_next()
    with tf.device("/job:worker/task:0"):
        out = y * 10.0
    try:
        with tf.Session(servers[2].target) as sess:
            np.testing.assert_allclose(sess.run(out), [30.0, 110.0])
            assert [sess.run(nxt) for _ in range(4)] == [0, 1, 4, 9]
    finally:
        for s in servers:
            s.stop()


def test_defun_errors_are_named():
    outer = tf.constant(1.0)
    with pytest.raises(ValueError, match="outer graph"):
        Defun(tf.float32)(lambda x: x + outer)
    with pytest.raises(TypeError, match="returned None"):
        Defun(tf.float32)(lambda x: None)
    f = Defun(tf.float32)(lambda x: x + 1.0)
    with pytest.raises(TypeError, match="takes 1 arguments"):
        f(tf.constant(1.0), tf.constant(2.0))


def test_map_and_filter_match_numpy_in_order():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    labels = np.arange(20, dtype=np.int64)
    ds = tf.data.Dataset.from_tensor_slices({"x": x, "y": labels})
    ds = ds.map(lambda e: (tf.reduce_sum(e["x"]) * 2.0, e["y"] + 100), num_parallel_calls=4)
    ds = ds.filter(lambda s, r: tf.greater(s, 60.0)).batch(3)
    s, r = ds.make_one_shot_iterator().get_next()
    assert s.shape.as_list() == [None] and r.dtype == tf.int64
    with tf.Session() as sess:
        got = []
        try:
            while True:
                got.append(sess.run([s, r]))
        except tf.errors.OutOfRangeError:
            pass
    sums = np.concatenate([g[0] for g in got])
    keep = x.sum(axis=1) * 2.0 > 60.0
    np.testing.assert_allclose(sums, x.sum(axis=1)[keep] * 2.0)  # in the input's order
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), labels[keep] + 100)
    assert [len(g[0]) for g in got] == [3] * (keep.sum() // 3) + ([keep.sum() % 3] if keep.sum() % 3 else [])


def test_map_errors_are_named():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(TypeError, match="Dataset.map: the function returned None"):
        ds.map(lambda v: None)
    with pytest.raises(TypeError, match="Dataset.filter: the predicate must return one scalar bool"):
        ds.filter(lambda v: v * 2)
    with pytest.raises(TypeError, match="Dataset.map: result 1"):
        ds.map(lambda v: (v, tf.no_op()))
    # A function failing on an element: the error names the function and the body node.
    bad = tf.data.Dataset.from_tensor_slices(np.array([[1.0, 2.0]], np.float32)).map(
        lambda v: tf.reshape(v, tf.stack([tf.size(v) + 1])))
    nxt = bad.make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=r"In function '.*Reshape"):
        sess.run(nxt)


def test_flat_map_concatenates_the_datasets_made_per_element():
    rows = np.arange(12, dtype=np.int64).reshape(4, 3)
    ds = tf.data.Dataset.from_tensor_slices(rows).flat_map(
        lambda r: tf.data.Dataset.from_tensor_slices(r).take(2).map(lambda v: v * 10))
    nxt = ds.make_one_shot_iterator().get_next()
    got = []
    with tf.Session() as sess:
        try:
            while True:
                got.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            pass
    assert got == (rows[:, :2] * 10).ravel().tolist()
    with pytest.raises(TypeError, match="flat_map: the function must return a Dataset"):
        tf.data.Dataset.range(3).flat_map(lambda v: v)


def reference_interleave(inner, cycle_length, block_length):
    """TensorFlow's interleave order over lists: an exhausted slot stays
    empty until the cycle comes back to it."""
    pending, slots, out = list(inner), [None] * cycle_length, []
    i, block, open_ = 0, 0, 0
    while pending or open_:
        if slots[i] is not None:
            if slots[i]:
                out.append(slots[i].pop(0))
                block += 1
                if block == block_length:
                    i, block = (i + 1) % cycle_length, 0
                continue
            slots[i], open_ = None, open_ - 1
            i, block = (i + 1) % cycle_length, 0
        elif pending:
            slots[i], open_ = list(pending.pop(0)), open_ + 1
        else:
            i, block = (i + 1) % cycle_length, 0
    return out


def drain(ds):
    nxt = ds.make_one_shot_iterator().get_next()
    got = []
    with tf.Session() as sess:
        try:
            while True:
                got.append(sess.run(nxt).tolist())
        except tf.errors.OutOfRangeError:
            pass
    return got


def test_interleave_cycles_through_the_datasets_made_per_element_in_tensorflows_order():
    # TensorFlow's documented example.
    ds = tf.data.Dataset.range(1, 6).interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(6),
                                                cycle_length=2, block_length=4)
    assert drain(ds) == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    # Inner datasets of different lengths (one empty), against the reference.
    lengths = [3, 0, 5, 1, 4, 2, 6]
    inner = [[10 * k + j for j in range(n)] for k, n in enumerate(lengths)]
    for cycle in (1, 2, 3, 8):
        for block in (1, 2, 5):
            ds = tf.data.Dataset.from_tensor_slices(np.array(lengths, dtype=np.int64)).interleave(
                lambda n: tf.data.Dataset.range(n), cycle_length=cycle, block_length=block)
            # The inner values are 0..n-1; tag them by their element the way the reference does.
            got = drain(ds)
            want = [v % 10 for v in reference_interleave(inner, cycle, block)]
            assert got == want, (cycle, block)
    # tf.contrib.data.parallel_interleave gives the same (deterministic) order.
    ds = tf.data.Dataset.range(1, 6).apply(tf.data.experimental.parallel_interleave(
        lambda x: tf.data.Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4))
    assert drain(ds)[:8] == [1, 1, 1, 1, 2, 2, 2, 2]
    with pytest.raises(ValueError, match="cycle_length must be a positive int"):
        tf.data.Dataset.range(3).interleave(lambda v: tf.data.Dataset.from_tensors(v), cycle_length=0)
    with pytest.raises(TypeError, match="interleave: the function must return a Dataset"):
        tf.data.Dataset.range(3).interleave(lambda v: v, cycle_length=2)
