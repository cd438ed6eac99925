"""TF1's everyday op surface (math, arrays, tf.nn, random seeds) through a
Session, each name against NumPy, in the argument forms TF1 programs use."""
import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def run(*fetches, feed_dict=None):
    with tf.Session() as sess:
        out = sess.run(list(fetches), feed_dict=feed_dict)
    return out[0] if len(out) == 1 else out


X = np.array([[1.5, -2.0, 0.25], [-0.5, 3.0, 2.0]], dtype=np.float32)


def test_elementwise_math_matches_numpy():
    x = tf.constant(X)
    cases = {
        tf.abs(x): np.abs(X), tf.sign(x): np.sign(X), tf.negative(x): -X, tf.square(x): X * X,
        tf.reciprocal(x): 1 / X, tf.floor(x): np.floor(X), tf.ceil(x): np.ceil(X), tf.round(x): np.round(X),
        tf.log1p(tf.abs(x)): np.log1p(np.abs(X)), tf.expm1(x): np.expm1(X), tf.sin(x): np.sin(X),
        tf.cos(x): np.cos(X), tf.rsqrt(tf.abs(x)): 1 / np.sqrt(np.abs(X)), tf.pow(x, 2.0): X ** 2,
        tf.maximum(x, 0.5): np.maximum(X, 0.5), tf.minimum(x, 0.5): np.minimum(X, 0.5),
        tf.squared_difference(x, 1.0): (X - 1) ** 2, tf.floordiv(x, 0.5): np.floor_divide(X, 0.5),
        tf.sigmoid(x): 1 / (1 + np.exp(-X)), tf.tanh(x): np.tanh(X), abs(x): np.abs(X), x ** 2: X ** 2,
        2.0 ** x: 2.0 ** X, x // 0.5: np.floor_divide(X, 0.5),
    }
    values = run(*cases)
    for got, want in zip(values, cases.values()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_is_nan_is_inf_is_finite():
    v = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    x = tf.constant(v)
    got = run(tf.is_nan(x), tf.is_inf(x), tf.is_finite(x))
    np.testing.assert_array_equal(got[0], np.isnan(v))
    np.testing.assert_array_equal(got[1], np.isinf(v))
    np.testing.assert_array_equal(got[2], np.isfinite(v))


def test_comparisons_and_logic():
    x = tf.constant(X)
    b = tf.constant([True, False, True])
    c = tf.constant([True, True, False])
    got = run(tf.less(x, 0.5), tf.less_equal(x, 0.25), tf.greater(x, 0.25), tf.greater_equal(x, 0.25),
              tf.not_equal(x, 0.25), tf.equal(x, 0.25), x <= 0.25, x >= 0.25, tf.logical_and(b, c),
              tf.logical_or(b, c), tf.logical_not(b), tf.logical_xor(b, c), b & c, b | c, ~b)
    want = [X < 0.5, X <= 0.25, X > 0.25, X >= 0.25, X != 0.25, X == 0.25, X <= 0.25, X >= 0.25,
            [True, False, False], [True, True, True], [False, True, False], [False, True, True],
            [True, False, False], [True, True, True], [False, True, False]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_casts_and_reductions():
    x = tf.constant(X)
    got = run(tf.to_int32(x), tf.to_int64(x), tf.to_double(x), tf.to_float(tf.constant([1, 2])),
              tf.cast(x, tf.bool), tf.reduce_any(x > 2.5, axis=1), tf.reduce_all(x > -3, keep_dims=True),
              tf.reduce_sum(x, reduction_indices=[0]), tf.reduce_mean(x, 1, keepdims=True),
              tf.argmin(x, axis=1), tf.argmax(x, 1, output_type=tf.int32), tf.add_n([x, x, x]),
              tf.reduce_logsumexp(x, axis=1), tf.count_nonzero(tf.floor(x)))
    assert got[0].dtype == np.int32 and got[1].dtype == np.int64 and got[2].dtype == np.float64
    np.testing.assert_array_equal(got[0], X.astype(np.int32))
    np.testing.assert_array_equal(got[3], [1.0, 2.0])
    np.testing.assert_array_equal(got[4], X != 0)
    np.testing.assert_array_equal(got[5], [False, True])
    np.testing.assert_array_equal(got[6], [[True]])
    np.testing.assert_allclose(got[7], X.sum(0))
    np.testing.assert_allclose(got[8], X.mean(1, keepdims=True))
    np.testing.assert_array_equal(got[9], X.argmin(1))
    assert got[10].dtype == np.int32
    np.testing.assert_allclose(got[11], 3 * X)
    np.testing.assert_allclose(got[12], np.log(np.exp(X).sum(1)), rtol=1e-6)
    assert got[13] == np.count_nonzero(np.floor(X))


def test_array_functions_match_numpy():
    x = tf.constant(X)
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = tf.constant(a)
    got = run(tf.transpose(t), tf.transpose(t, perm=[1, 0, 2]), tf.concat([x, x], axis=1), tf.concat([x, x], 0),
              tf.stack([x, x], axis=1), tf.slice(t, [0, 1, 0], [-1, 2, 2]), tf.tile(x, [2, 1]),
              tf.expand_dims(x, 1), tf.expand_dims(x, axis=-1), tf.squeeze(tf.constant(a[:1, :, :1])),
              tf.squeeze(tf.constant(a[:1, :, :1]), axis=[2]), tf.shape(t), tf.shape(t, out_type=tf.int64),
              tf.size(t), tf.rank(t), tf.zeros_like(x), tf.ones_like(x), tf.ones_like(x, dtype=tf.int32),
              tf.range(5), tf.range(1, 10, 3), tf.range(0.0, 1.0, 0.25), tf.pad(x, [[1, 0], [0, 2]]),
              tf.pad(x, [[0, 0], [1, 1]], constant_values=7))
    want = [a.T, a.transpose(1, 0, 2), np.concatenate([X, X], 1), np.concatenate([X, X], 0), np.stack([X, X], 1),
            a[:, 1:3, 0:2], np.tile(X, [2, 1]), X[:, None], X[..., None], a[:1, :, :1].squeeze(),
            a[:1, :, :1].squeeze(2), [2, 3, 4], [2, 3, 4], 24, 3, np.zeros_like(X), np.ones_like(X),
            np.ones_like(X, dtype=np.int32), np.arange(5), np.arange(1, 10, 3), np.arange(0, 1, 0.25),
            np.pad(X, [[1, 0], [0, 2]]), np.pad(X, [[0, 0], [1, 1]], constant_values=7)]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"case {i}")
    assert got[12].dtype == np.int64 and got[17].dtype == np.int32


def test_unstack_split_one_hot_where():
    x = tf.constant(X)
    parts = tf.unstack(x, axis=1)
    halves = tf.split(tf.constant(np.arange(12).reshape(2, 6)), 2, axis=1)
    sized = tf.split(tf.constant(np.arange(12).reshape(2, 6)), [1, -1, 2], 1)
    hot = tf.one_hot([0, 2, 1], depth=3)
    hot_axis = tf.one_hot(tf.constant([0, 2], dtype=tf.int64), 3, on_value=5, off_value=-1, axis=0)
    got = run(parts, halves, sized, hot, hot_axis, tf.where(x > 0), tf.where(x > 0, x, -x),
              tf.where([True, False], [1, 2], [3, 4]))
    assert len(got[0]) == 3
    np.testing.assert_array_equal(got[0][1], X[:, 1])
    np.testing.assert_array_equal(got[1][1], np.arange(12).reshape(2, 6)[:, 3:])
    assert [p.shape for p in got[2]] == [(2, 1), (2, 3), (2, 2)]
    np.testing.assert_array_equal(got[3], np.eye(3)[[0, 2, 1]])
    np.testing.assert_array_equal(got[4], [[5, -1], [-1, -1], [-1, 5]])
    np.testing.assert_array_equal(got[5], np.argwhere(X > 0))
    np.testing.assert_array_equal(got[6], np.abs(X))
    np.testing.assert_array_equal(got[7], [1, 4])


def test_tensor_indexing_is_numpy_basic_indexing():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tf.placeholder(tf.float32, [None, 3, 4])
    cases = [t[:, 1:3], t[0], t[-1], t[..., None], t[::-1], t[:, ::2, -1], t[1, 2, 3], t[..., 1:], t[:, tf.newaxis]]
    assert cases[0].shape.as_list() == [None, 2, 4]
    assert cases[1].shape.as_list() == [3, 4]
    got = run(*cases, feed_dict={t: a})
    want = [a[:, 1:3], a[0], a[-1], a[..., None], a[::-1], a[:, ::2, -1], a[1, 2, 3], a[..., 1:], a[:, None]]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"case {i}")


def test_indexing_variables_and_with_tensor_indices():
    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    i64 = tf.placeholder(tf.int64, [])
    i32 = tf.placeholder(tf.int32, [])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run([v[1], v[:, 1:], v[i64], v[i32, 1:]], feed_dict={i64: 0, i32: 1})
    np.testing.assert_array_equal(got[0], [3, 4, 5])
    np.testing.assert_array_equal(got[1], [[1, 2], [4, 5]])
    np.testing.assert_array_equal(got[2], [0, 1, 2])
    np.testing.assert_array_equal(got[3], [4, 5])


def test_indexing_gradient_and_strided_slice():
    x = tf.placeholder(tf.float32, [2, 3])
    y = tf.reduce_sum(x[:, 1:] * 2.0)
    g = tf.gradients(y, x)[0]
    s = tf.strided_slice(x, [0, 2], [2, 0], [1, -1])
    got = run(g, s, feed_dict={x: X})
    np.testing.assert_array_equal(got[0], [[0, 2, 2], [0, 2, 2]])
    np.testing.assert_array_equal(got[1], X[0:2, 2:0:-1])


@pytest.mark.parametrize("build, error", [
    (lambda x: x[5], "index 5 of dimension 0 is out of bounds"),
    (lambda x: tf.transpose(x, [0, 2]), "2 is out of range"),
    (lambda x: tf.squeeze(x, [0]), "can not squeeze axis 0"),
    (lambda x: tf.split(x, 2, axis=4), "axis 4 is out of range"),
    (lambda x: tf.split(x, 2, axis=1), "not divisible by num_split = 2"),
    (lambda x: tf.pad(x, [[1, 1]]), "one row per dimension"),
    (lambda x: tf.nn.top_k(x, 4), "k = 4"),
])
def test_bad_arguments_raise_naming_the_value(build, error):
    with pytest.raises(tf.errors.InvalidArgumentError, match=error):
        build(tf.constant(X))


def test_bad_python_arguments_raise_value_errors():
    x = tf.constant(X)
    with pytest.raises(ValueError, match="rate"):
        tf.nn.dropout(x, rate=1.5)
    with pytest.raises(ValueError, match="exactly one"):
        tf.nn.dropout(x)
    with pytest.raises(TypeError, match="valid indices"):
        x[[0, 1]]


def test_clipping():
    x = tf.constant(X)
    v = tf.constant([3.0, 4.0])
    clipped, norm = tf.clip_by_global_norm([v, None, v * 0.0], 2.5)
    got = run(tf.clip_by_value(x, -1.0, 1.0), tf.clip_by_norm(v, 1.0), tf.clip_by_norm(v, 10.0), clipped[0],
              clipped[2], norm, tf.global_norm([v, v]))
    np.testing.assert_allclose(got[0], np.clip(X, -1, 1))
    np.testing.assert_allclose(got[1], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(got[2], [3.0, 4.0])
    np.testing.assert_allclose(got[3], [1.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(got[4], [0.0, 0.0])
    assert clipped[1] is None
    np.testing.assert_allclose(got[5], 5.0, rtol=1e-6)
    np.testing.assert_allclose(got[6], np.sqrt(50), rtol=1e-6)
    gx = tf.gradients(tf.reduce_sum(tf.clip_by_value(x, -1.0, 1.0)), x)[0]
    np.testing.assert_array_equal(run(gx), (np.abs(X) <= 1).astype(np.float32))


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_nn_losses_match_numpy():
    logits = tf.constant(X)
    labels = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]], dtype=np.float32)
    z = np.array([[1, 0, 1], [0, 0, 1]], dtype=np.float32)
    xent = -(labels * np.log(_softmax(X))).sum(1)
    sig = np.maximum(X, 0) - X * z + np.log1p(np.exp(-np.abs(X)))
    q = 2.0
    weighted = (1 - z) * X + (1 + (q - 1) * z) * (np.log1p(np.exp(-np.abs(X))) + np.maximum(-X, 0))
    got = run(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits),
              tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits),
              tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[2, 0], logits=logits),
              tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=logits),
              tf.nn.weighted_cross_entropy_with_logits(targets=z, logits=logits, pos_weight=q),
              tf.nn.l2_loss(logits), tf.nn.log_softmax(logits), tf.nn.softmax(logits, axis=0))
    np.testing.assert_allclose(got[0], xent, rtol=1e-5)
    np.testing.assert_allclose(got[1], xent, rtol=1e-5)
    np.testing.assert_allclose(got[2], -np.log(_softmax(X))[[0, 1], [2, 0]], rtol=1e-5)
    np.testing.assert_allclose(got[3], sig, rtol=1e-5)
    np.testing.assert_allclose(got[4], weighted, rtol=1e-5)
    np.testing.assert_allclose(got[5], (X ** 2).sum() / 2, rtol=1e-6)
    np.testing.assert_allclose(got[6], np.log(_softmax(X)), rtol=1e-5)
    np.testing.assert_allclose(got[7], _softmax(X.T).T, rtol=1e-5)


def test_softmax_xent_v1_does_not_backprop_into_labels_v2_does():
    logits = tf.constant(X)
    labels = tf.constant(_softmax(X[::-1].copy()))
    g1 = tf.gradients(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits), [labels])[0]
    v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    g2 = tf.gradients(v2, [labels])[0]
    assert g1 is None or np.all(run(g1) == 0)
    np.testing.assert_allclose(run(g2), -np.log(_softmax(X)), rtol=1e-5)


def test_nn_layers_and_statistics():
    x = tf.constant(X)
    w = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, 2.0]], dtype=np.float32)
    b = np.array([0.1, -0.1], dtype=np.float32)
    mean, var = tf.nn.moments(x, axes=[0])
    mean_k, var_k = tf.nn.moments(x, [0, 1], keep_dims=True)
    values, indices = tf.nn.top_k(x, k=2)
    img = np.random.RandomState(0).randn(1, 2, 2, 5).astype(np.float32)
    got = run(tf.nn.xw_plus_b(x, w, b), tf.nn.bias_add(x, [1.0, 2.0, 3.0]), tf.nn.relu6(x * 4), tf.nn.elu(x),
              tf.nn.softplus(x), tf.nn.l2_normalize(x, axis=1), tf.nn.l2_normalize(x, dim=0), mean, var, mean_k,
              var_k, values, indices, tf.nn.in_top_k(x, [0, 2], 1), tf.nn.in_top_k(x, [0, 2], k=2),
              tf.nn.zero_fraction(tf.nn.relu(x)), tf.nn.lrn(img, depth_radius=1, bias=1.0, alpha=0.5, beta=0.75),
              tf.nn.leaky_relu(x, alpha=0.1),
              tf.nn.batch_normalization(x, mean, var, offset=1.0, scale=2.0, variance_epsilon=1e-3))
    np.testing.assert_allclose(got[0], X @ w + b, rtol=1e-6)
    np.testing.assert_allclose(got[1], X + [1, 2, 3])
    np.testing.assert_allclose(got[2], np.clip(4 * X, 0, 6))
    np.testing.assert_allclose(got[3], np.where(X > 0, X, np.expm1(X)), rtol=1e-6)
    np.testing.assert_allclose(got[4], np.log1p(np.exp(X)), rtol=1e-6)
    np.testing.assert_allclose(got[5], X / np.linalg.norm(X, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(got[6], X / np.linalg.norm(X, axis=0, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(got[7], X.mean(0), rtol=1e-6)
    np.testing.assert_allclose(got[8], X.var(0), rtol=1e-5)
    assert got[9].shape == (1, 1) and np.isclose(got[10][0, 0], X.var())
    np.testing.assert_allclose(got[11], -np.sort(-X, 1)[:, :2])
    np.testing.assert_array_equal(got[12], np.argsort(-X, 1)[:, :2])
    np.testing.assert_array_equal(got[13], [True, False])
    np.testing.assert_array_equal(got[14], [True, True])
    np.testing.assert_allclose(got[15], np.mean(np.maximum(X, 0) == 0))
    sq = img ** 2
    norm = np.stack([1 + 0.5 * sq[..., max(0, c - 1):c + 2].sum(-1) for c in range(5)], -1)
    np.testing.assert_allclose(got[16], img / norm ** 0.75, rtol=1e-5)
    np.testing.assert_allclose(got[17], np.where(X > 0, X, 0.1 * X), rtol=1e-6)
    np.testing.assert_allclose(got[18], (X - X.mean(0)) * 2 / np.sqrt(X.var(0) + 1e-3) + 1, rtol=1e-5)


def test_dropout_keep_prob_and_rate():
    x = tf.ones([100, 100])
    kept = tf.nn.dropout(x, keep_prob=0.5)
    rated = tf.nn.dropout(x, rate=0.75)
    shared = tf.nn.dropout(x, 0.5, noise_shape=[100, 1])
    a, b, c = run(kept, rated, shared)
    assert set(np.unique(a)) <= {0.0, 2.0} and 0.4 < np.mean(a > 0) < 0.6
    assert set(np.unique(b)) <= {0.0, 4.0} and 0.15 < np.mean(b > 0) < 0.35
    assert all(len(set(row)) == 1 for row in c)  # one draw per row
    with pytest.raises(ValueError, match="exactly one"):
        tf.nn.dropout(x)


def test_unknown_nn_name_raises_naming_it():
    with pytest.raises(NotImplementedError, match="tf.nn.conv3d"):
        tf.nn.conv3d


def _draws(graph_seed, op_seeds):
    tf.reset_default_graph()
    if graph_seed is not None:
        tf.set_random_seed(graph_seed)
    ops = [tf.random_normal([3], seed=s) for s in op_seeds] + [tf.random_uniform([2, 2], seed=op_seeds[0]),
                                                               tf.truncated_normal([4])]
    with tf.Session() as sess:
        return [sess.run(o) for o in ops], sess.run(ops[0])


def test_graph_seed_makes_programs_repeat():
    first, again = _draws(42, [None, None])
    second, _ = _draws(42, [None, None])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # two ops, two op seeds
    assert not np.array_equal(first[0], again)  # successive runs draw anew
    other, _ = _draws(7, [None, None])
    assert not np.array_equal(first[0], other[0])


def test_op_seed_alone_repeats_and_no_seed_does_not():
    a, _ = _draws(None, [3, 3])
    b, _ = _draws(None, [3, 3])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[0], a[1])  # same op seed, same default graph seed
    c, _ = _draws(None, [None, None])
    d, _ = _draws(None, [None, None])
    assert not np.array_equal(c[0], d[0])


def test_random_values_have_their_distributions():
    tf.set_random_seed(1)
    u = tf.random_uniform([20000], minval=-2, maxval=3)
    n = tf.random_normal([20000], mean=1.0, stddev=2.0)
    t = tf.truncated_normal([20000], stddev=0.5)
    i = tf.random_uniform([1000], minval=2, maxval=5, dtype=tf.int32)
    u, n, t, i = run(u, n, t, i)
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    assert abs(n.mean() - 1) < 0.05 and abs(n.std() - 2) < 0.05
    assert np.abs(t).max() <= 1.0
    assert i.dtype == np.int32 and set(np.unique(i)) == {2, 3, 4}


def test_initializers_follow_the_graph_seed():
    def weights():
        tf.reset_default_graph()
        tf.set_random_seed(5)
        w = tf.Variable(tf.truncated_normal([3, 3], stddev=0.1))
        v = tf.get_variable("v", [2, 2])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run([w, v])
    a, b = weights(), weights()
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_reverse_eye_linspace_sequence_mask_tensordot():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = tf.constant(a)
    lengths = tf.placeholder(tf.int32, [None])
    got = run(tf.reverse(t, axis=[1]), tf.reverse_v2(t, [0, -1]), tf.eye(3), tf.eye(2, 3, dtype=tf.int32),
              tf.linspace(0.0, 1.0, 5), tf.lin_space(-1.0, 1.0, 3), tf.sequence_mask([1, 3, 0], 4),
              tf.sequence_mask(lengths, dtype=tf.float32), tf.tensordot(t, b, axes=1),
              tf.tensordot(t, tf.constant(a), axes=[[1, 2], [1, 2]]), tf.tensordot(b, b, axes=[[0], [0]]),
              feed_dict={lengths: [2, 0, 1]})
    want = [a[:, ::-1], a[::-1, :, ::-1], np.eye(3), np.eye(2, 3, dtype=np.int32), np.linspace(0, 1, 5),
            np.linspace(-1, 1, 3), np.arange(4) < np.array([1, 3, 0])[:, None],
            (np.arange(2) < np.array([2, 0, 1])[:, None]).astype(np.float32), np.tensordot(a, b, axes=1),
            np.tensordot(a, a, axes=[[1, 2], [1, 2]]), np.tensordot(b, b, axes=[[0], [0]])]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"case {i}")
    assert got[3].dtype == np.int32 and got[7].dtype == np.float32


def test_conv2d_transpose_is_the_gradient_of_conv2d():
    rng = np.random.RandomState(1)
    x = tf.constant(rng.randn(2, 4, 4, 3).astype(np.float32))
    w = tf.constant(rng.randn(3, 3, 3, 5).astype(np.float32))
    y = tf.nn.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME")
    dy = tf.constant(rng.randn(2, 2, 2, 5).astype(np.float32))
    dx = tf.gradients(y, x, grad_ys=dy)[0]
    t = tf.nn.conv2d_transpose(dy, w, output_shape=[2, 4, 4, 3], strides=[1, 2, 2, 1], padding="SAME")
    g = tf.gradients(tf.reduce_sum(t), [dy, w])
    got = run(dx, t, g[0], g[1])
    np.testing.assert_allclose(got[1], got[0], rtol=1e-5)
    assert got[1].shape == (2, 4, 4, 3) and got[2].shape == (2, 2, 2, 5) and got[3].shape == (3, 3, 3, 5)


def test_more_activations_and_xent_over_dim_0():
    x = tf.constant(X)
    labels = _softmax(X.T).T
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    got = run(tf.nn.log_sigmoid(x), tf.nn.selu(x), tf.nn.swish(x),
              tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=x, dim=0))
    np.testing.assert_allclose(got[0], -np.log1p(np.exp(-X)), rtol=1e-5)
    np.testing.assert_allclose(got[1], scale * np.where(X > 0, X, alpha * np.expm1(X)), rtol=1e-5)
    np.testing.assert_allclose(got[2], X / (1 + np.exp(-X)), rtol=1e-5)
    np.testing.assert_allclose(got[3], -(labels * np.log(_softmax(X.T).T)).sum(0), rtol=1e-5)
