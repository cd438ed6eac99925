"""tf.cond, tf.case, tf.while_loop and tf.TensorArray (distflow/
control_flow_ops.py, tensor_array_ops.py): values against NumPy, gradients
against finite differences, captured tensors, nested structures and loops,
and the errors a bad loop gets."""
import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def finite_difference(sess, loss, x_ph, x0, eps=1e-6):
    g = np.zeros_like(x0)
    for idx in np.ndindex(*x0.shape):
        hi, lo = x0.copy(), x0.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = (sess.run(loss, {x_ph: hi}) - sess.run(loss, {x_ph: lo})) / (2 * eps)
    return g


def test_cond_runs_the_taken_branch_with_captured_tensors_and_structures():
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [3])
    w = tf.constant([1.0, 2.0, 3.0])
    out = tf.cond(p, lambda: {"a": x * w, "b": (tf.reduce_sum(x), tf.constant(1))},
                  lambda: {"a": x - w, "b": (tf.reduce_max(x), tf.constant(2))})
    single = tf.cond(p, lambda: x + 1.0, lambda: x)
    xv = np.array([4.0, -1.0, 0.5], np.float32)
    with tf.Session() as sess:
        for pv in (True, False):
            r, s = sess.run([out, single], {p: pv, x: xv})
            np.testing.assert_allclose(r["a"], xv * [1, 2, 3] if pv else xv - [1, 2, 3])
            np.testing.assert_allclose(r["b"][0], xv.sum() if pv else xv.max())
            assert r["b"][1] == (1 if pv else 2)
            np.testing.assert_allclose(s, xv + 1 if pv else xv)


def test_cond_gradient_matches_finite_differences_and_case_picks_first_true():
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float64, [2])
    y = tf.cond(p, lambda: tf.reduce_sum(tf.sin(x) * x), lambda: tf.reduce_sum(x * x * x))
    (g,) = tf.gradients(y, [x])
    k = tf.placeholder(tf.int32, [])
    c = tf.case([(tf.less(k, 0), lambda: tf.constant(-1)), (tf.equal(k, 0), lambda: tf.constant(0))],
                default=lambda: tf.constant(1))
    x0 = np.array([0.3, -1.2])
    with tf.Session() as sess:
        for pv in (True, False):
            got = sess.run(g, {p: pv, x: x0})
            want = np.sin(x0) + x0 * np.cos(x0) if pv else 3 * x0 * x0
            np.testing.assert_allclose(got, want, rtol=1e-9)
        assert [sess.run(c, {k: v}) for v in (-5, 0, 7)] == [-1, 0, 1]


def test_while_loop_nested_structures_captures_and_maximum_iterations():
    n = tf.placeholder(tf.int32, [])
    step = tf.constant(3)

    def body(i, acc):
        return i + 1, {"sum": acc["sum"] + i * step, "prod": acc["prod"] * 2.0}

    i, acc = tf.while_loop(lambda i, acc: i < n, body, [0, {"sum": tf.constant(0), "prod": tf.constant(1.0)}])
    capped = tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)], maximum_iterations=4)
    with tf.Session() as sess:
        for nv in (0, 1, 6):
            iv, a, cv = sess.run([i, acc, capped], {n: nv})
            assert iv == nv and a["sum"] == 3 * sum(range(nv)) and a["prod"] == 2.0 ** nv
            assert cv == min(nv, 4)


def test_nested_while_loops_with_a_cond_inside():
    n = tf.placeholder(tf.int32, [])

    def inner_body(j, t, even):
        return j + 1, t + tf.cond(even, lambda: j, lambda: -j), tf.logical_not(even)

    def outer(i, total):
        inner = tf.while_loop(lambda j, t, even: j < i, inner_body, [0, total, True])
        return i + 1, inner[1]

    _, total = tf.while_loop(lambda i, t: i < n, outer, [0, 0])
    want = sum(sum(j if j % 2 == 0 else -j for j in range(i)) for i in range(5))
    with tf.Session() as sess:
        assert sess.run(total, {n: 5}) == want


def test_while_loop_gradients_reach_loop_vars_captures_and_variables():
    x = tf.placeholder(tf.float64, [2])
    w = tf.placeholder(tf.float64, [2])
    # y = x * w^3 elementwise, then sin: three iterations of v <- v * w, a tanh on the way.
    _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.tanh(v) * w), [0, x])
    loss = tf.reduce_sum(tf.sin(y))
    gx, gw = tf.gradients(loss, [x, w])
    x0, w0 = np.array([0.4, -0.7]), np.array([1.3, 0.6])
    with tf.Session() as sess:
        got_x, got_w = sess.run([gx, gw], {x: x0, w: w0})
        for ph, v0, got, other in ((x, x0, got_x, (w, w0)), (w, w0, got_w, (x, x0))):
            num = np.zeros_like(v0)
            for k in range(2):
                hi, lo = v0.copy(), v0.copy()
                hi[k] += 1e-6
                lo[k] -= 1e-6
                num[k] = (sess.run(loss, {ph: hi, other[0]: other[1]}) -
                          sess.run(loss, {ph: lo, other[0]: other[1]})) / 2e-6
            np.testing.assert_allclose(got, num, rtol=1e-6)
    # An optimizer through a loop: a variable read in the body learns.
    tf.reset_default_graph()
    v = tf.Variable(1.0)
    _, out = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * v), [0, tf.constant(1.0)])
    loss = tf.square(out - 8.0)
    train = tf.train.GradientDescentOptimizer(0.003).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(200):
            sess.run(train)
        assert abs(sess.run(v) - 2.0) < 1e-2


def test_case_exclusive_fails_naming_the_preds_when_two_hold():
    k = tf.placeholder(tf.int32, [], name="k")
    small = tf.less(k, 5, name="small")
    big = tf.greater(k, 2, name="big")
    c = tf.case([(small, lambda: tf.constant(1)), (big, lambda: tf.constant(2))], default=lambda: tf.constant(3),
                exclusive=True)
    unchecked = tf.case([(small, lambda: tf.constant(1)), (big, lambda: tf.constant(2))], default=lambda: 3)
    with tf.Session() as sess:
        assert [sess.run(c, {k: v}) for v in (1, 8)] == [1, 2]
        assert sess.run(unchecked, {k: 4}) == 1  # not exclusive: the first true pred wins
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            sess.run(c, {k: 4})  # small and big
    msg = str(e.value)
    assert "exclusive=True: more than 1 conditions (small:0, big:0) evaluated as True" in msg, msg
    assert "[1 1]" in msg or "[true true]" in msg.lower(), msg
    # tf.Assert on its own.
    x = tf.placeholder(tf.float32, [3])
    check = tf.Assert(tf.reduce_all(x > 0), ["x must be positive:", x])
    with tf.control_dependencies([check]):
        y = tf.identity(x)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: [1, 2, 3]}), [1, 2, 3])
        with pytest.raises(tf.errors.InvalidArgumentError, match="x must be positive"):
            sess.run(y, {x: [1, -2, 3]})


def numeric_gradient(f, values, eps=1e-6):
    """Central differences of f(values) (a list of arrays) in each array."""
    grads = []
    for k, v0 in enumerate(values):
        g = np.zeros_like(v0)
        for idx in np.ndindex(*v0.shape):
            hi = [v.copy() for v in values]
            lo = [v.copy() for v in values]
            hi[k][idx] += eps
            lo[k][idx] -= eps
            g[idx] = (f(hi) - f(lo)) / (2 * eps)
        grads.append(g)
    return grads


def test_variables_first_made_in_a_while_loop_body_get_their_gradients():
    # get_variable without reuse and a tf.layers.dense, both first called in
    # the body: the gradient's rebuild of the body gets the same variables.
    x0 = np.array([[0.5, -0.2, 0.9], [0.1, 0.4, -0.6]])

    def body(i, h):
        w = tf.get_variable("w", shape=[3, 3], dtype=tf.float64,
                            initializer=tf.random_normal_initializer(stddev=0.5, seed=1))
        h = tf.tanh(tf.matmul(h, w))
        return i + 1, tf.layers.dense(h, 3, activation=tf.sin, name="mix")

    _, y = tf.while_loop(lambda i, h: i < 3, body, [0, tf.constant(x0)])
    loss = tf.reduce_sum(y * y)
    variables = tf.global_variables()
    assert sorted(v.op.name for v in variables) == ["mix/bias", "mix/kernel", "w"]
    grads = tf.gradients(loss, variables)
    assert all(g is not None for g in grads)
    assert len(tf.global_variables()) == 3  # the rebuild made no new variables
    names = [v.op.name for v in variables]

    def numpy_loss(vals):
        p = dict(zip(names, vals))
        h = x0
        for _ in range(3):
            h = np.sin(np.tanh(h @ p["w"]) @ p["mix/kernel"] + p["mix/bias"])
        return np.sum(h * h)

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        vals = sess.run(variables)
        got_loss, got = sess.run([loss, grads])
    np.testing.assert_allclose(got_loss, numpy_loss(vals), rtol=1e-12)
    for g, want in zip(got, numeric_gradient(numpy_loss, vals)):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9)


def test_a_variable_made_in_an_inner_loop_body_gets_its_gradient_and_trains():
    x0 = np.array([0.3, -0.8], np.float64)

    def outer(i, v):
        def inner(j, u):
            a = tf.get_variable("a", shape=[2], dtype=tf.float64, initializer=tf.constant_initializer(0.9))
            return j + 1, tf.sin(u * a)
        _, v = tf.while_loop(lambda j, u: j < 2, inner, [0, v])
        return i + 1, v + 0.5

    _, y = tf.while_loop(lambda i, v: i < 2, outer, [0, tf.constant(x0)])
    loss = tf.reduce_sum(tf.square(y - 1.0))
    (a,) = tf.global_variables()
    (ga,) = tf.gradients(loss, [a])
    train = tf.train.GradientDescentOptimizer(0.2).minimize(loss)

    def numpy_loss(vals):
        v = x0
        for _ in range(2):
            for _ in range(2):
                v = np.sin(v * vals[0])
            v = v + 0.5
        return np.sum(np.square(v - 1.0))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a0 = sess.run(a)
        np.testing.assert_allclose(sess.run(ga), numeric_gradient(numpy_loss, [a0])[0], rtol=1e-6)
        before = sess.run(loss)
        for _ in range(30):
            sess.run(train)
        after = sess.run(loss)
        assert after < 0.7 * before, (before, after)  # 0.30 -> 0.175, its minimum


def test_tensor_array_ops_and_gradients():
    x = tf.placeholder(tf.float64, [4, 2])
    ta = tf.TensorArray(tf.float64, size=4).unstack(x)
    # An index takes one write (as in TF): the result is a new array.
    ta2 = tf.TensorArray(tf.float64, size=4).write(1, ta.read(3) * 10.0).scatter([0, 2], tf.ones([2, 2], tf.float64))
    ta2 = ta2.write(3, ta.read(3))
    grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(2, [1.0, 2.0]).write(0, [5.0, 6.0])
    loss = tf.reduce_sum(ta2.stack() * ta2.stack()) + tf.reduce_sum(ta2.gather([1, 3]))
    (g,) = tf.gradients(loss, [x])
    x0 = np.arange(8, dtype=np.float64).reshape(4, 2) / 10
    with tf.Session() as sess:
        st, gathered, size, gv, gr, gsize = sess.run(
            [ta2.stack(), ta2.gather([3, 1]), ta2.size(), g, grown.stack(), grown.size()], {x: x0})
        want = np.array([[1, 1], x0[3] * 10, [1, 1], x0[3]])
        np.testing.assert_allclose(st, want)
        np.testing.assert_allclose(gathered, want[[3, 1]])
        assert size == 4 and gsize == 3
        np.testing.assert_allclose(gr, [[5, 6], [0, 0], [1, 2]])
        np.testing.assert_allclose(gv, finite_difference(sess, loss, x, x0), rtol=1e-6, atol=1e-8)


def test_tensor_array_split_values_gradient_and_errors():
    x = tf.placeholder(tf.float64, [6, 2])
    ta = tf.TensorArray(tf.float64, size=3).split(x, [2, 2, 2])
    weights = tf.constant([[1.0], [2.0]], tf.float64)
    loss = tf.reduce_sum(tf.sin(ta.stack()) * weights) + tf.reduce_sum(ta.read(1))
    (g,) = tf.gradients(loss, [x])
    lengths = tf.placeholder(tf.int32, [None])
    dyn = tf.TensorArray(tf.float64, size=0, dynamic_size=True).split(x, lengths)
    x0 = np.arange(12.0).reshape(6, 2) / 7
    with tf.Session() as sess:
        read, stacked, gv = sess.run([ta.read(1), ta.stack(), g], {x: x0})
        np.testing.assert_allclose(read, x0[2:4])
        np.testing.assert_allclose(stacked, x0.reshape(3, 2, 2))
        np.testing.assert_allclose(gv, finite_difference(sess, loss, x, x0), rtol=1e-6, atol=1e-8)
        got, size = sess.run([dyn.concat(), dyn.size()], {x: x0, lengths: [3, 3]})
        np.testing.assert_allclose(got, x0)
        assert size == 2
        # Pieces of different lengths: read and concat work, stack names the shapes.
        got, second = sess.run([dyn.concat(), dyn.read(1)], {x: x0, lengths: [2, 4]})
        np.testing.assert_allclose(got, x0)
        np.testing.assert_allclose(second, x0[2:])
        with pytest.raises(tf.errors.InvalidArgumentError, match="different shapes"):
            sess.run(dyn.stack(), {x: x0, lengths: [2, 4]})
    with pytest.raises(ValueError, match=r"lengths \[2, 3\] sum to 5"):
        tf.TensorArray(tf.float64, size=2).split(x, [2, 3])


def test_tensor_array_split_of_different_lengths_gets_its_gradient():
    x = tf.placeholder(tf.float64, [5, 2])
    ta = tf.TensorArray(tf.float64, size=3).split(x, [1, 3, 1])
    loss = tf.reduce_sum(tf.sin(ta.read(1))) + tf.reduce_sum(ta.read(2) * 3.0) + \
        tf.reduce_sum(tf.square(ta.concat()))
    (g,) = tf.gradients(loss, [x])
    x0 = np.arange(10.0).reshape(5, 2) / 9
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(ta.read(1), {x: x0}), x0[1:4])
        np.testing.assert_allclose(sess.run(g, {x: x0}), finite_difference(sess, loss, x, x0), rtol=1e-6,
                                   atol=1e-8)


def test_tensor_array_in_a_while_loop_with_gradient():
    x = tf.placeholder(tf.float64, [5, 3])
    inp = tf.TensorArray(tf.float64, size=5).unstack(x)
    out = tf.TensorArray(tf.float64, size=5, element_shape=[3])

    def body(t, acc, ta):
        acc = acc * 0.5 + inp.read(t)
        return t + 1, acc, ta.write(t, acc * acc)

    _, acc, out = tf.while_loop(lambda t, a, ta: t < 5, body, [0, tf.zeros([3], tf.float64), out])
    stacked = out.stack()
    loss = tf.reduce_sum(stacked) + tf.reduce_sum(acc)
    (g,) = tf.gradients(loss, [x])
    x0 = np.linspace(-1, 1, 15).reshape(5, 3)
    ref, a = [], np.zeros(3)
    for t in range(5):
        a = a * 0.5 + x0[t]
        ref.append(a * a)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(stacked, {x: x0}), np.array(ref))
        np.testing.assert_allclose(sess.run(g, {x: x0}), finite_difference(sess, loss, x, x0), rtol=1e-6)


def test_tensor_arrays_a_loop_body_only_writes_or_also_reads_get_their_gradients():
    # A fixed-size array the body only writes keeps no history for the
    # gradient (its rebuilt body sees zeros); one the body also reads keeps
    # its history. Both against finite differences.
    x = tf.placeholder(tf.float64, [4, 2])
    inp = tf.TensorArray(tf.float64, size=4).unstack(x)
    rec = tf.TensorArray(tf.float64, size=4, element_shape=[2]).write(0, inp.read(0))
    only = tf.TensorArray(tf.float64, size=4, element_shape=[2])

    def body(t, rec, only):
        prev = rec.read(t - 1)
        rec = rec.write(t, tf.sin(prev) * inp.read(t))
        return t + 1, rec, only.write(t, prev * prev * tf.constant([1.0, -2.0], tf.float64))

    _, rec, only = tf.while_loop(lambda t, *_: t < 4, body, [1, rec, only])
    loss = tf.reduce_sum(rec.stack() * rec.stack()) + tf.reduce_sum(tf.tanh(only.gather([1, 2, 3])))
    (g,) = tf.gradients(loss, [x])
    x0 = np.array([[0.3, -0.5], [0.8, 0.1], [-0.4, 0.9], [0.2, 0.6]])
    r = [x0[0]]
    for t in range(1, 4):
        r.append(np.sin(r[-1]) * x0[t])
    r = np.array(r)
    with tf.Session() as sess:
        got_rec, got_only, gv = sess.run([rec.stack(), only.stack(), g], {x: x0})
        np.testing.assert_allclose(got_rec, r)
        np.testing.assert_allclose(got_only[1:], r[:3] ** 2 * [1.0, -2.0])
        np.testing.assert_allclose(gv, finite_difference(sess, loss, x, x0), rtol=1e-6, atol=1e-9)


def test_dynamic_size_tensor_array_written_in_a_loop_runs_and_gets_its_gradient():
    # Its shape grows every iteration: the loop keeps its shapes, not its
    # values (before, the history's Concat failed when the loop ran).
    x = tf.placeholder(tf.float64, [5, 3])
    inp = tf.TensorArray(tf.float64, size=5).unstack(x)
    out = tf.TensorArray(tf.float64, size=0, dynamic_size=True, element_shape=[3])

    def body(t, acc, ta):
        acc = tf.sin(acc) + inp.read(t)
        return t + 1, acc, ta.write(t, acc * acc)

    _, acc, out = tf.while_loop(lambda t, a, ta: t < 5, body, [0, tf.zeros([3], tf.float64), out])
    loss = tf.reduce_sum(tf.tanh(out.stack())) + tf.reduce_sum(acc)
    (g,) = tf.gradients(loss, [x])
    x0 = np.linspace(-1, 1, 15).reshape(5, 3)
    ref, a = [], np.zeros(3)
    for t in range(5):
        a = np.sin(a) + x0[t]
        ref.append(a * a)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out.stack(), {x: x0}), np.array(ref))
        assert sess.run(out.size(), {x: x0}) == 5
        np.testing.assert_allclose(sess.run(g, {x: x0}), finite_difference(sess, loss, x, x0), rtol=1e-6)
    # One the body also reads gets its gradient too (its values are in the
    # array, not in the loop's history).
    tf.reset_default_graph()
    x = tf.placeholder(tf.float64, [3])
    grow = tf.TensorArray(tf.float64, size=1, dynamic_size=True, element_shape=[3]).write(0, x)
    _, grow = tf.while_loop(lambda t, ta: t < 4, lambda t, ta: (t + 1, ta.write(t, tf.sin(ta.read(t - 1)) * 2.0)),
                            [1, grow])
    loss = tf.reduce_sum(tf.square(grow.stack()))
    (g,) = tf.gradients(loss, [x])
    x0 = np.array([1.0, 2.0, 3.0])
    with tf.Session() as sess:
        want = [x0]
        for _ in range(3):
            want.append(np.sin(want[-1]) * 2.0)
        np.testing.assert_allclose(sess.run(grow.stack(), {x: x0}), np.array(want))
        np.testing.assert_allclose(sess.run(g, {x: x0}), finite_difference(sess, loss, x, x0), rtol=1e-6)


def test_a_loop_of_5000_tensor_array_writes_and_its_gradient():
    # Long loops stay cheap: a write stores its element in the array (no
    # copy of the array), and the loop keeps no history of the array's flow.
    n = 5000
    x = tf.placeholder(tf.float64, [n])
    inp = tf.TensorArray(tf.float64, size=n).unstack(x)
    out = tf.TensorArray(tf.float64, size=n, element_shape=[])

    def body(t, acc, ta):
        acc = acc * 0.9 + inp.read(t)
        return t + 1, acc, ta.write(t, tf.sin(acc))

    _, _, out = tf.while_loop(lambda t, a, ta: t < n, body, [0, tf.constant(0.0, tf.float64), out])
    (g,) = tf.gradients(tf.reduce_sum(out.stack()), [x])
    x0 = np.random.default_rng(0).standard_normal(n) * 0.1
    with tf.Session() as sess:
        got, gv = sess.run([out.stack(), g], {x: x0})
    a, acc = 0.0, []
    for t in range(n):
        a = a * 0.9 + x0[t]
        acc.append(a)
    np.testing.assert_allclose(got, np.sin(acc), rtol=1e-12)
    # d/dx_j sum_t sin(a_t) = sum_{t >= j} cos(a_t) 0.9^(t - j)
    want, r = np.zeros(n), 0.0
    for j in range(n - 1, -1, -1):
        r = r * 0.9 + np.cos(acc[j])
        want[j] = r
    np.testing.assert_allclose(gv, want, rtol=1e-9)


def test_bad_loops_are_named_errors():
    with pytest.raises(Exception, match="shape invariant"):
        tf.while_loop(lambda v: tf.size(v) < 10, lambda v: tf.concat([v, v], 0), [tf.constant([1])])
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="structure different"):
        tf.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1,), [0, 1])
    tf.reset_default_graph()
    with pytest.raises(TypeError, match="must be callable"):
        tf.cond(tf.constant(True), 1, lambda: 2)
    # With an invariant, the growing loop works.
    tf.reset_default_graph()
    v = tf.while_loop(lambda v: tf.size(v) < 10, lambda v: tf.concat([v, v], 0), [tf.constant([1])],
                      shape_invariants=[tf.TensorShape([None])])
    with tf.Session() as sess:
        assert sess.run(v).tolist() == [1] * 16


def test_batch_normalization_with_a_tensor_training_flag():
    x = tf.placeholder(tf.float32, [4, 2])
    training = tf.placeholder(tf.bool, [])
    y = tf.layers.batch_normalization(x, training=training, momentum=0.5)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    mean_var = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    xv = np.array([[1, 2], [3, 4], [5, 0], [7, 2]], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out, _ = sess.run([y, updates], {x: xv, training: True})
        want = (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-3)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(sess.run(mean_var), 0.5 * xv.mean(0), rtol=1e-6)
        out, _ = sess.run([y, updates], {x: xv, training: False})  # the moving averages, no update
        mm = 0.5 * xv.mean(0)
        mv = 0.5 + 0.5 * xv.var(0)
        np.testing.assert_allclose(out, (xv - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(sess.run(mean_var), mm, rtol=1e-6)


def test_random_ops_in_a_loop_body_are_not_redrawn_for_the_gradient():
    # acc += x * u_t, u_t drawn in the body: d(sum acc)/dx is the sum of the
    # draws the forward loop made in the same step.
    x = tf.placeholder(tf.float32, [3])
    draws = tf.TensorArray(tf.float32, size=6, element_shape=[3])

    def body(t, acc, ta):
        u = tf.random_uniform([3])
        return t + 1, acc + x * u, ta.write(t, u)

    _, acc, draws = tf.while_loop(lambda t, *_: t < 6, body, [0, tf.zeros([3]), draws])
    (g,) = tf.gradients(tf.reduce_sum(acc), [x])
    with tf.Session() as sess:
        for _ in range(2):
            drawn, gv = sess.run([draws.stack(), g], {x: [1.0, 2.0, 3.0]})
            np.testing.assert_allclose(gv, drawn.sum(axis=0), rtol=1e-5)
            assert np.ptp(drawn) > 0  # real draws, different per iteration


def test_dropout_in_a_loop_body_gets_the_gradient_of_its_own_mask():
    # tf.nn.dropout in the body: the gradient of each kept element is
    # 1 / keep_prob, of each dropped one 0, by the forward's mask.
    x = tf.placeholder(tf.float32, [50])
    out = tf.TensorArray(tf.float32, size=3, element_shape=[50])

    def body(t, ta):
        return t + 1, ta.write(t, tf.nn.dropout(x, keep_prob=0.5))

    _, out = tf.while_loop(lambda t, _: t < 3, body, [0, out])
    stacked = out.stack()
    (g,) = tf.gradients(tf.reduce_sum(stacked), [x])
    with tf.Session() as sess:
        got, gv = sess.run([stacked, g], {x: np.ones(50)})
    kept = (got != 0).sum(axis=0)
    np.testing.assert_allclose(gv, kept / 0.5, rtol=1e-6)
    assert 0 < (got != 0).sum() < got.size


def test_a_tensor_array_goes_into_and_out_of_cond_branches_with_its_gradient():
    # Element 1 is x[1] * 3 if p else sin(x[1]), written inside a branch into
    # an array made outside; the other branch's own array comes out too.
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float64, [3, 2])
    ta = tf.TensorArray(tf.float64, size=3, element_shape=[2]).write(0, x[0]).write(2, x[2] * x[2])

    def true_fn():
        return ta.write(1, x[1] * 3.0), tf.TensorArray(tf.float64, size=1).write(0, x[0])

    def false_fn():
        return ta.write(1, tf.sin(x[1])), tf.TensorArray(tf.float64, size=1).write(0, -x[0])

    out, own = tf.cond(p, true_fn, false_fn)
    stacked = out.stack()
    loss = tf.reduce_sum(stacked * stacked) + tf.reduce_sum(own.read(0) * [1.0, 2.0])
    (g,) = tf.gradients(loss, [x])
    x0 = np.arange(1.0, 7.0).reshape(3, 2) / 5
    with tf.Session() as sess:
        for pv in (True, False):
            got, mine, gv = sess.run([stacked, own.read(0), g], {x: x0, p: pv})
            row1 = x0[1] * 3 if pv else np.sin(x0[1])
            np.testing.assert_allclose(got, [x0[0], row1, x0[2] ** 2])
            np.testing.assert_allclose(mine, x0[0] if pv else -x0[0])
            want = np.zeros_like(x0)
            want[0] = 2 * x0[0] + (1 if pv else -1) * np.array([1.0, 2.0])
            want[1] = 2 * row1 * (3 if pv else np.cos(x0[1]))
            want[2] = 4 * x0[2] ** 3
            np.testing.assert_allclose(gv, want, rtol=1e-9)
    with pytest.raises(TypeError, match="both must return a TensorArray there"):
        tf.cond(p, lambda: ta, lambda: x)


def test_a_tensor_array_index_takes_one_write_as_in_tensorflow():
    ta = tf.TensorArray(tf.float32, size=2, tensor_array_name="twice").write(0, 1.0).write(0, 2.0)
    unknown = tf.TensorArray(tf.float32, size=2, tensor_array_name="unknown", infer_shape=False)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="TensorArray 'twice': cannot write index 0: it has already been written"):
            sess.run(ta.stack())
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="TensorArray 'unknown': cannot read index 1: it has not been written"):
            sess.run(unknown.read(1))
        # An element never written reads as zeros of the shape the others have (TF's inferred element shape).
        np.testing.assert_allclose(sess.run(tf.TensorArray(tf.float32, size=3).write(1, [1.0, 2.0]).stack()),
                                   [[0, 0], [1, 2], [0, 0]])


def test_random_ops_in_a_cond_inside_a_loop_body_are_not_redrawn_for_the_gradient():
    # acc += cond(t < 3, x * u_t, x * 2) with u_t drawn in the true branch:
    # d(sum acc)/dx is the sum of the forward's draws (and 2 per later t).
    x = tf.placeholder(tf.float32, [3])
    draws = tf.TensorArray(tf.float32, size=6, element_shape=[3])

    def body(t, acc, ta):
        def drawn():
            u = tf.random_uniform([3])
            return x * u, u
        step, u = tf.cond(t < 3, drawn, lambda: (x * 2.0, tf.zeros([3])))
        return t + 1, acc + step, ta.write(t, u)

    _, acc, draws = tf.while_loop(lambda t, *_: t < 6, body, [0, tf.zeros([3]), draws])
    (g,) = tf.gradients(tf.reduce_sum(acc), [x])
    with tf.Session() as sess:
        for _ in range(2):
            drawn, gv = sess.run([draws.stack(), g], {x: [1.0, 2.0, 3.0]})
            np.testing.assert_allclose(gv, drawn.sum(axis=0) + 3 * 2.0, rtol=1e-5)
            assert np.ptp(drawn[:3]) > 0 and not drawn[3:].any()
