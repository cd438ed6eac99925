"""TF1's RNN cells and functions (distflow/rnn.py): each cell's output and
state against a NumPy implementation of its equations for given weights,
static_rnn vs dynamic_rnn, sequence_length masking, TF1's variable names and
reuse, and a small LSTM that learns."""
import numpy as np
import pytest

import distflow.compat.v1 as tf

RNG = np.random.RandomState(7)
B, T, D = 3, 4, 2


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def sig(x):
    return 1 / (1 + np.exp(-x))


def np_lstm(x, c, h, k, b, forget_bias=1.0):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ k + b, 4, axis=1)
    c2 = c * sig(f + forget_bias) + sig(i) * np.tanh(j)
    return np.tanh(c2) * sig(o), c2


def np_gru(x, h, gk, gb, ck, cb):
    r, u = np.split(sig(np.concatenate([x, h], 1) @ gk + gb), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ ck + cb)
    return u * h + (1 - u) * c


def set_random_weights(sess):
    """Every trainable variable to random values; returns {name: value}."""
    vals = {}
    for v in tf.trainable_variables():
        vals[v.name] = RNG.uniform(-0.8, 0.8, v.shape.as_list()).astype(np.float32)
        v.load(vals[v.name], sess) if hasattr(v, "load") else sess.run(v.assign(vals[v.name]))
    return vals


def one_step(cell, state_fn):
    x = tf.placeholder(tf.float32, [B, D])
    state = state_fn(cell)
    out, new_state = cell(x, state)
    return x, out, new_state


def test_basic_rnn_cell_matches_numpy():
    cell = tf.nn.rnn_cell.BasicRNNCell(5)
    x, out, st = one_step(cell, lambda c: c.zero_state(B, tf.float32))
    assert cell.state_size == 5 and cell.output_size == 5
    xv = RNG.randn(B, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        o, s = sess.run([out, st], {x: xv})
    want = np.tanh(np.concatenate([xv, np.zeros((B, 5))], 1) @ w["basic_rnn_cell/kernel:0"] +
                   w["basic_rnn_cell/bias:0"])
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,fb", [("BasicLSTMCell", 1.0), ("BasicLSTMCell", 0.3), ("LSTMCell", 1.0)])
def test_lstm_cells_match_numpy(cls, fb):
    cell = getattr(tf.nn.rnn_cell, cls)(4, forget_bias=fb)
    c0 = RNG.randn(B, 4).astype(np.float32)
    h0 = RNG.randn(B, 4).astype(np.float32)
    x, out, st = one_step(cell, lambda c: tf.nn.rnn_cell.LSTMStateTuple(tf.constant(c0), tf.constant(h0)))
    assert isinstance(st, tf.nn.rnn_cell.LSTMStateTuple)
    xv = RNG.randn(B, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        o, (c, h) = sess.run([out, st], {x: xv})
    scope = "basic_lstm_cell" if cls == "BasicLSTMCell" else "lstm_cell"
    h_want, c_want = np_lstm(xv, c0, h0, w[f"{scope}/kernel:0"], w[f"{scope}/bias:0"], fb)
    np.testing.assert_allclose(o, h_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, h_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, c_want, rtol=1e-5, atol=1e-6)


def test_basic_lstm_state_not_tuple_concatenates_c_and_h():
    cell = tf.nn.rnn_cell.BasicLSTMCell(3, state_is_tuple=False)
    assert cell.state_size == 6
    s0 = RNG.randn(B, 6).astype(np.float32)
    x, out, st = one_step(cell, lambda c: tf.constant(s0))
    xv = RNG.randn(B, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        o, s = sess.run([out, st], {x: xv})
    h_want, c_want = np_lstm(xv, s0[:, :3], s0[:, 3:], w["basic_lstm_cell/kernel:0"], w["basic_lstm_cell/bias:0"])
    np.testing.assert_allclose(s, np.concatenate([c_want, h_want], 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o, h_want, rtol=1e-5, atol=1e-6)


def test_lstm_cell_projection_and_peepholes_match_numpy():
    cell = tf.nn.rnn_cell.LSTMCell(4, use_peepholes=True, num_proj=2)
    assert cell.output_size == 2 and tuple(cell.state_size) == (4, 2)
    x, out, st = one_step(cell, lambda c: c.zero_state(B, tf.float32))
    names = sorted(v.name for v in tf.global_variables())
    assert names == ["lstm_cell/bias:0", "lstm_cell/kernel:0", "lstm_cell/projection/kernel:0",
                     "lstm_cell/w_f_diag:0", "lstm_cell/w_i_diag:0", "lstm_cell/w_o_diag:0"]
    xv = RNG.randn(B, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        o, (c, m) = sess.run([out, st], {x: xv})
    p = lambda n: w[f"lstm_cell/{n}:0"]  # noqa: E731
    c0, m0 = np.zeros((B, 4)), np.zeros((B, 2))
    i, j, f, og = np.split(np.concatenate([xv, m0], 1) @ p("kernel") + p("bias"), 4, axis=1)
    c_want = sig(f + 1.0 + p("w_f_diag") * c0) * c0 + sig(i + p("w_i_diag") * c0) * np.tanh(j)
    m_want = (sig(og + p("w_o_diag") * c_want) * np.tanh(c_want)) @ p("projection/kernel")
    np.testing.assert_allclose(c, c_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, m_want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o, m_want, rtol=1e-5, atol=1e-6)


def test_gru_cell_matches_numpy():
    cell = tf.nn.rnn_cell.GRUCell(3)
    h0 = RNG.randn(B, 3).astype(np.float32)
    x, out, st = one_step(cell, lambda c: tf.constant(h0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # the gates' bias starts at 1, the candidate's at 0 (TF1's defaults)
        np.testing.assert_array_equal(sess.run("gru_cell/gates/bias:0"), np.ones(6))
        np.testing.assert_array_equal(sess.run("gru_cell/candidate/bias:0"), np.zeros(3))
        w = set_random_weights(sess)
        xv = RNG.randn(B, D).astype(np.float32)
        o, s = sess.run([out, st], {x: xv})
    want = np_gru(xv, h0, w["gru_cell/gates/kernel:0"], w["gru_cell/gates/bias:0"],
                  w["gru_cell/candidate/kernel:0"], w["gru_cell/candidate/bias:0"])
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-6)


def test_multi_rnn_cell_stacks_and_names_per_layer():
    cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(3), tf.nn.rnn_cell.GRUCell(2)])
    x = tf.placeholder(tf.float32, [None, T, D])
    out, (s0, s1) = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == ["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias:0",
                     "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel:0",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/bias:0",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/candidate/kernel:0",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias:0",
                     "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel:0"]
    xv = RNG.randn(B, T, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        o, c0, h0, g1 = sess.run([out, s0.c, s0.h, s1], {x: xv})
    p = "rnn/multi_rnn_cell/cell_"
    c, h, g = np.zeros((B, 3)), np.zeros((B, 3)), np.zeros((B, 2))
    for t in range(T):
        h, c = np_lstm(xv[:, t], c, h, w[p + "0/basic_lstm_cell/kernel:0"], w[p + "0/basic_lstm_cell/bias:0"])
        g = np_gru(h, g, w[p + "1/gru_cell/gates/kernel:0"], w[p + "1/gru_cell/gates/bias:0"],
                   w[p + "1/gru_cell/candidate/kernel:0"], w[p + "1/gru_cell/candidate/bias:0"])
        np.testing.assert_allclose(o[:, t], g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c0, c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h0, h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g1, g, rtol=1e-5, atol=1e-5)


def test_static_and_dynamic_rnn_agree_and_match_numpy():
    x = tf.placeholder(tf.float32, [None, T, D])
    cell = tf.nn.rnn_cell.BasicLSTMCell(4)
    outs, st = tf.contrib.rnn.static_rnn(cell, tf.unstack(x, T, 1), dtype=tf.float32)
    # dynamic_rnn in a reused "rnn" scope: a new cell shares the variables
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
        d_out, d_st = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(4), x, dtype=tf.float32)
    tm_out, _ = tf.nn.dynamic_rnn(cell, tf.transpose(x, [1, 0, 2]), dtype=tf.float32, time_major=True)
    assert len(tf.trainable_variables()) == 2
    assert d_out.shape.as_list() == [None, T, 4] and tm_out.shape.as_list() == [T, None, 4]
    xv = RNG.randn(B, T, D).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        so, (sc, sh), do, (dc, dh), to = sess.run([outs, st, d_out, d_st, tm_out], {x: xv})
    np.testing.assert_allclose(np.stack(so, 1), do, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.transpose(to, [1, 0, 2]), do, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sc, dc, rtol=1e-6, atol=1e-6)
    c, h = np.zeros((B, 4)), np.zeros((B, 4))
    for t in range(T):
        h, c = np_lstm(xv[:, t], c, h, w["rnn/basic_lstm_cell/kernel:0"], w["rnn/basic_lstm_cell/bias:0"])
        np.testing.assert_allclose(do[:, t], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dh, h, rtol=1e-5, atol=1e-5)


def test_sequence_length_zeroes_outputs_and_carries_state():
    x = tf.placeholder(tf.float32, [None, T, D])
    lengths = tf.placeholder(tf.int32, [None])
    cell = tf.nn.rnn_cell.GRUCell(3)
    d_out, d_st = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    s_out, s_st = tf.nn.static_rnn(cell, tf.unstack(x, T, 1), sequence_length=lengths, dtype=tf.float32)
    xv = RNG.randn(B, T, D).astype(np.float32)
    lv = np.array([2, 4, 0], np.int32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        do, ds, so, ss = sess.run([d_out, d_st, s_out, s_st], {x: xv, lengths: lv})
    np.testing.assert_allclose(np.stack(so, 1), do, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ss, ds, rtol=1e-6, atol=1e-6)
    h = np.zeros((B, 3))
    for t in range(T):
        h_new = np_gru(xv[:, t], h, w["rnn/gru_cell/gates/kernel:0"], w["rnn/gru_cell/gates/bias:0"],
                       w["rnn/gru_cell/candidate/kernel:0"], w["rnn/gru_cell/candidate/bias:0"])
        live = (t < lv)[:, None]
        np.testing.assert_allclose(do[:, t], np.where(live, h_new, 0), rtol=1e-5, atol=1e-5)
        h = np.where(live, h_new, h)  # past its end a sequence's state is carried through
    want_final = h
    np.testing.assert_allclose(ds, want_final, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ds[2], np.zeros(3))  # length 0: the initial state


def test_variable_names_scopes_and_reuse():
    x = tf.placeholder(tf.float32, [None, T, D])
    with tf.variable_scope("enc"):
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(2), x, dtype=tf.float32)
    tf.nn.dynamic_rnn(tf.nn.rnn_cell.LSTMCell(2), x, dtype=tf.float32, scope="dec")
    tf.nn.static_rnn(tf.nn.rnn_cell.BasicRNNCell(2, name="mine"), tf.unstack(x, T, 1), dtype=tf.float32)
    names = sorted(v.name for v in tf.global_variables())
    assert names == ["dec/lstm_cell/bias:0", "dec/lstm_cell/kernel:0", "enc/rnn/basic_lstm_cell/bias:0",
                     "enc/rnn/basic_lstm_cell/kernel:0", "rnn/mine/bias:0", "rnn/mine/kernel:0"]
    # a second cell in the same scope without reuse is TF1's error
    with pytest.raises(ValueError, match="already exists"):
        with tf.variable_scope("enc"):
            tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(2), x, dtype=tf.float32)


def test_bidirectional_dynamic_rnn_reverses_each_sequence():
    x = tf.placeholder(tf.float32, [None, T, D])
    lengths = tf.placeholder(tf.int32, [None])
    fw, bw = tf.nn.rnn_cell.BasicRNNCell(2), tf.nn.rnn_cell.BasicRNNCell(2)
    (o_fw, o_bw), (s_fw, s_bw) = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=lengths,
                                                                 dtype=tf.float32)
    names = sorted(v.name for v in tf.global_variables())
    assert names == ["bidirectional_rnn/bw/basic_rnn_cell/bias:0", "bidirectional_rnn/bw/basic_rnn_cell/kernel:0",
                     "bidirectional_rnn/fw/basic_rnn_cell/bias:0", "bidirectional_rnn/fw/basic_rnn_cell/kernel:0"]
    xv = RNG.randn(B, T, D).astype(np.float32)
    lv = np.array([3, 4, 1], np.int32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = set_random_weights(sess)
        ob, sb = sess.run([o_bw, s_bw], {x: xv, lengths: lv})
    k, bias = w["bidirectional_rnn/bw/basic_rnn_cell/kernel:0"], w["bidirectional_rnn/bw/basic_rnn_cell/bias:0"]
    for b in range(B):
        h = np.zeros((1, 2))
        for t in reversed(range(lv[b])):
            h = np.tanh(np.concatenate([xv[b:b + 1, t], h], 1) @ k + bias)
            np.testing.assert_allclose(ob[b, t], h[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(ob[b, lv[b]:], np.zeros((T - lv[b], 2)))
        np.testing.assert_allclose(sb[b], h[0], rtol=1e-5, atol=1e-5)


def test_dropout_wrapper_keeps_everything_at_one_and_drops_at_half():
    x = tf.placeholder(tf.float32, [None, T, D])
    keep = tf.placeholder(tf.float32, [])
    cell = tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(50), output_keep_prob=keep)
    out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    xv = RNG.randn(B, T, D).astype(np.float32) + 3
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        full = sess.run(out, {x: xv, keep: 1.0})
        half = sess.run(out, {x: xv, keep: 0.5})
    assert np.all(full != 0)
    zeros = half == 0
    assert 0.3 < zeros.mean() < 0.7
    np.testing.assert_allclose(half[~zeros], 2 * full[~zeros], rtol=1e-5)
    with pytest.raises(ValueError, match="output_keep_prob"):
        tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(2), output_keep_prob=1.5)


def test_dynamic_rnn_over_a_while_loop_equals_unrolled_with_gradients():
    """Unknown time steps: a while_loop with TensorArrays; the same outputs,
    final state and kernel gradient as the unrolled graph of the same cell."""
    xv = RNG.randn(B, T, D).astype(np.float64)
    lengths = [4, 2, 3]
    results = []
    for time_major, steps in ((False, T), (False, None), (True, None)):
        tf.reset_default_graph()
        x = tf.placeholder(tf.float64, [T, B, D] if time_major and steps else
                           ([None, B, D] if time_major else [B, steps, D]))
        cell = tf.nn.rnn_cell.LSTMCell(3, dtype=tf.float64, initializer=tf.constant_initializer(0.3))
        init = cell.zero_state(B, tf.float64)
        out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, initial_state=init, time_major=time_major)
        if time_major:
            out = tf.transpose(out, [1, 0, 2])
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(st.h)
        (g,) = tf.gradients(loss, [cell.variables[0]])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            feed = xv.transpose(1, 0, 2) if time_major else xv
            results.append(sess.run([out, st.c, g], {x: feed}))
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert np.all(results[1][0][1, 2:] == 0)  # past the sequence's length


def test_bad_inputs_are_named_errors():
    y = tf.placeholder(tf.float32, [None, T, D])
    with pytest.raises(ValueError, match="dtype must be specified"):
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicRNNCell(2), y)
    with pytest.raises(ValueError, match="known depth"):
        tf.nn.static_rnn(tf.nn.rnn_cell.BasicRNNCell(2), [tf.placeholder(tf.float32, [None, None])],
                         dtype=tf.float32)
    with pytest.raises(NotImplementedError, match="tf.contrib.rnn.NoSuchCell"):
        tf.contrib.rnn.NoSuchCell


def test_small_lstm_learns_to_sum_a_sequence():
    tf.set_random_seed(3)
    rng = np.random.RandomState(0)
    x = tf.placeholder(tf.float32, [None, 5, 1])
    y = tf.placeholder(tf.float32, [None, 1])
    out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.LSTMCell(8), x, dtype=tf.float32)
    pred = tf.layers.dense(out[:, -1, :], 1)
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.AdamOptimizer(0.02).minimize(loss)
    xs = rng.uniform(-0.5, 0.5, (64, 5, 1)).astype(np.float32)
    ys = xs.sum(axis=1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: xs, y: ys})
        for _ in range(250):
            sess.run(train, {x: xs, y: ys})
        last = sess.run(loss, {x: xs, y: ys})
    assert last < first / 10, (first, last)


def test_static_bidirectional_rnn_equals_bidirectional_dynamic_rnn():
    x = tf.placeholder(tf.float32, [None, T, D])
    lengths = tf.placeholder(tf.int32, [None])
    fw, bw = tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.BasicLSTMCell(3)
    outs, s_fw, s_bw = tf.nn.static_bidirectional_rnn(fw, bw, tf.unstack(x, T, 1), sequence_length=lengths,
                                                      dtype=tf.float32)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
        (d_fw, d_bw), (ds_fw, ds_bw) = tf.nn.bidirectional_dynamic_rnn(
            tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.BasicLSTMCell(3), x, sequence_length=lengths,
            dtype=tf.float32)
    assert len(tf.trainable_variables()) == 6
    xv = RNG.randn(B, T, D).astype(np.float32)
    feed = {x: xv, lengths: np.array([4, 2, 3], np.int32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        set_random_weights(sess)
        so, sf, sb, df, db, dsf, dsb = sess.run([outs, s_fw, s_bw, d_fw, d_bw, ds_fw, ds_bw], feed)
    assert so[0].shape == (B, 5)
    np.testing.assert_allclose(np.stack(so, 1), np.concatenate([df, db], 2), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sf, dsf, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sb.h, dsb.h, rtol=1e-6, atol=1e-6)


def test_lstm_gradient_matches_finite_differences():
    x = tf.constant(RNG.randn(2, 3, D).astype(np.float64))
    cell = tf.nn.rnn_cell.LSTMCell(3, dtype=tf.float64)
    out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=[3, 2], dtype=tf.float64)
    loss = tf.reduce_sum(out * out) + tf.reduce_sum(st.c)
    kernel = [v for v in tf.trainable_variables() if v.name == "rnn/lstm_cell/kernel:0"][0]
    (grad,) = tf.gradients(loss, [kernel])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k0, g = sess.run([kernel, grad])
        eps = 1e-6
        for idx in [(0, 0), (1, 5), (3, 11), (4, 7)]:
            vals = []
            for sgn in (1, -1):
                k = k0.copy()
                k[idx] += sgn * eps
                kernel.load(k, sess)
                vals.append(sess.run(loss))
            np.testing.assert_allclose(g[idx], (vals[0] - vals[1]) / (2 * eps), rtol=1e-5, atol=1e-7)


def test_multi_rnn_cell_with_concatenated_state_equals_tuple_state():
    x = tf.placeholder(tf.float32, [None, T, D])
    tup = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.GRUCell(3)])
    cat = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.GRUCell(3)], state_is_tuple=False)
    assert tup.state_size == (2, 3) and cat.state_size == 5 and cat.output_size == 3
    o1, s1 = tf.nn.dynamic_rnn(tup, x, dtype=tf.float32)
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
        o2, s2 = tf.nn.dynamic_rnn(cat, x, dtype=tf.float32)
    assert s2.shape.as_list() == [None, 5]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        set_random_weights(sess)
        a, (sa, sb), b, sc = sess.run([o1, s1, o2, s2], {x: RNG.randn(B, T, D).astype(np.float32)})
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.concatenate([sa, sb], 1), sc, rtol=1e-6, atol=1e-6)
