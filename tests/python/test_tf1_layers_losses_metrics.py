"""tf.layers, tf.losses, tf.metrics, collections, learning-rate schedules,
moving averages and the small TF1 modules (gfile, logging, contrib) as
TF1 programs use them, each value checked against NumPy."""
import os

import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_graph_keys_and_collections_follow_tensorflow():
    assert tf.GraphKeys.GLOBAL_VARIABLES == "variables"
    assert tf.GraphKeys.UPDATE_OPS == "update_ops"
    w = tf.Variable(1.0, name="w")
    c = tf.Variable(2.0, name="c", trainable=False)
    loc = tf.Variable(3.0, name="loc", trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES])
    assert [v.name for v in tf.global_variables()] == ["w:0", "c:0"]
    assert [v.name for v in tf.trainable_variables()] == ["w:0"]
    assert [v.name for v in tf.local_variables()] == ["loc:0"]
    tf.add_to_collection("mine", w)
    tf.add_to_collections(["mine", "yours"], c)
    assert tf.get_collection("mine") == [w, c]
    assert tf.get_collection("mine", scope="c") == [c]
    assert tf.get_collection_ref("yours") == [c]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # The global initializer leaves local variables alone, as TF1.
        assert not sess.run(tf.is_variable_initialized(loc))
        sess.run(tf.local_variables_initializer())
        assert sess.run(loc) == 3.0
        assert sess.run(tf.is_variable_initialized(loc))


def test_variable_scopes_name_and_share_variables():
    with tf.variable_scope("net"):
        a = tf.get_variable("a", [2], initializer=tf.zeros_initializer())
        with tf.variable_scope("inner"):
            b = tf.get_variable("b", [1])
    assert a.name == "net/a:0" and b.name == "net/inner/b:0"
    with tf.variable_scope("net", reuse=True):
        assert tf.get_variable("a", [2]) is a
    with tf.variable_scope("net", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("a") is a
        fresh = tf.get_variable("fresh", [3])
    assert fresh.name == "net/fresh:0"
    with pytest.raises(ValueError, match="already exists"):
        with tf.variable_scope("net"):
            tf.get_variable("a", [2])
    with pytest.raises(ValueError, match="does not exist"):
        with tf.variable_scope("net", reuse=True):
            tf.get_variable("missing", [2])
    with tf.variable_scope(None, default_name="block"):
        x = tf.get_variable("x", [1])
    with tf.variable_scope(None, default_name="block"):
        y = tf.get_variable("x", [1])
    assert (x.name, y.name) == ("block/x:0", "block_1/x:0")
    with tf.variable_scope("reg", regularizer=lambda w: tf.reduce_sum(w) * 2.0):
        r = tf.get_variable("r", [2], initializer=tf.constant_initializer(1.5))
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 1
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(r), [1.5, 1.5])
        assert sess.run(losses[0]) == pytest.approx(6.0)


def test_dense_and_conv_layers_compute_what_their_variables_say():
    x = tf.placeholder(tf.float32, [None, 4, 4, 2])
    conv = tf.layers.conv2d(x, filters=3, kernel_size=3, padding="same", activation=tf.nn.relu)
    pool = tf.layers.max_pooling2d(conv, pool_size=2, strides=2)
    avg = tf.layers.average_pooling2d(conv, 2, 2)
    flat = tf.layers.flatten(pool)
    out = tf.layers.dense(flat, 5, kernel_regularizer=tf.contrib.layers.l2_regularizer(0.1))
    out2 = tf.layers.dense(out, 2, name="head")
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == ["conv2d/bias:0", "conv2d/kernel:0", "dense/bias:0", "dense/kernel:0", "head/bias:0",
                     "head/kernel:0"]
    assert flat.shape.as_list() == [None, 12]
    rng = np.random.RandomState(0)
    feed = rng.randn(3, 4, 4, 2).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k, b, dk, db, hk, hb = sess.run(["conv2d/kernel:0", "conv2d/bias:0", "dense/kernel:0", "dense/bias:0",
                                         "head/kernel:0", "head/bias:0"])
        got_pool, got_avg, got, got2, reg = sess.run(
            [pool, avg, out, out2, tf.losses.get_regularization_loss()], {x: feed})
    # NumPy: SAME 3x3 convolution, relu, 2x2 pools, dense layers.
    padded = np.pad(feed, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((3, 4, 4, 3), np.float32)
    for i in range(4):
        for j in range(4):
            ref[:, i, j, :] = np.tensordot(padded[:, i:i + 3, j:j + 3, :], k, axes=([1, 2, 3], [0, 1, 2]))
    ref = np.maximum(ref + b, 0)
    ref_pool = ref.reshape(3, 2, 2, 2, 2, 3).max(axis=(2, 4))
    ref_avg = ref.reshape(3, 2, 2, 2, 2, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(got_pool, ref_pool, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_avg, ref_avg, rtol=1e-4, atol=1e-5)
    ref_out = ref_pool.reshape(3, -1) @ dk + db
    np.testing.assert_allclose(got, ref_out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got2, ref_out @ hk + hb, rtol=1e-4, atol=1e-5)
    assert reg == pytest.approx(0.1 * 0.5 * float((dk ** 2).sum()), rel=1e-5)


def test_dropout_and_batch_normalization_take_a_bool_or_a_boolean_tensor():
    x = tf.placeholder(tf.float32, [None, 3])
    training = tf.placeholder(tf.bool, [])
    kept = tf.layers.dropout(x, rate=0.5, training=False)
    dropped = tf.layers.dropout(x, rate=0.5, training=training)
    bn = tf.layers.batch_normalization(x, momentum=0.9, training=training)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2
    data = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(kept, {x: data}), data)
        np.testing.assert_array_equal(sess.run(dropped, {x: data, training: False}), data)
        d = sess.run(dropped, {x: data, training: True})
        assert set(np.unique(d / data)) <= {0.0, 2.0}
        # Training: the batch's moments, and the moving averages move 10% of the way.
        got, _ = sess.run([bn, updates], {x: data, training: True})
        mean, var = data.mean(0), data.var(0)
        np.testing.assert_allclose(got, (data - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)
        mm, mv = sess.run(["batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"])
        np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-5)
        np.testing.assert_allclose(mv, 0.9 + 0.1 * var, rtol=1e-5)
        # Not training: the moving averages, which the update ops leave alone.
        got, _ = sess.run([bn, updates], {x: data, training: False})
        np.testing.assert_allclose(got, (data - mm) / np.sqrt(mv + 1e-3), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(sess.run("batch_normalization/moving_mean:0"), mm)


def test_losses_reduce_as_tensorflow_and_collect_themselves():
    logits = tf.constant([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    labels = tf.constant([0, 2])
    onehot = tf.constant([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    sparse = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    dense = tf.losses.softmax_cross_entropy(onehot, logits)
    weighted = tf.losses.sparse_softmax_cross_entropy(labels, logits, weights=tf.constant([1.0, 0.0]))
    mse = tf.losses.mean_squared_error(tf.constant([1.0, 2.0]), tf.constant([1.5, 1.0]))
    sig = tf.losses.sigmoid_cross_entropy(tf.constant([[1.0, 0.0]]), tf.constant([[0.3, -1.2]]))
    hub = tf.losses.huber_loss(tf.constant([0.0, 0.0]), tf.constant([0.5, 3.0]))
    assert len(tf.losses.get_losses()) == 6
    total = tf.losses.get_total_loss()
    z = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    xent = -logp[[0, 1], [0, 2]]
    with tf.Session() as sess:
        got = sess.run([sparse, dense, weighted, mse, sig, hub, total])
    assert got[0] == pytest.approx(xent.mean(), rel=1e-5)
    assert got[1] == pytest.approx(xent.mean(), rel=1e-5)
    assert got[2] == pytest.approx(xent[0], rel=1e-5)  # divided by the one non-zero weight
    assert got[3] == pytest.approx((0.25 + 1.0) / 2, rel=1e-6)
    s = np.array([0.3, -1.2])
    ref_sig = (np.maximum(s, 0) - s * np.array([1.0, 0.0]) + np.log1p(np.exp(-np.abs(s)))).mean()
    assert got[4] == pytest.approx(ref_sig, rel=1e-5)
    assert got[5] == pytest.approx((0.125 + 2.5) / 2, rel=1e-6)
    assert got[6] == pytest.approx(sum(got[:6]), rel=1e-5)
    with pytest.raises(TypeError, match="int32 or int64"):
        tf.losses.sparse_softmax_cross_entropy(tf.constant([0.0]), tf.constant([[1.0, 2.0]]))


def test_metrics_accumulate_over_batches_in_local_variables():
    labels = tf.placeholder(tf.int64, [None])
    preds = tf.placeholder(tf.int64, [None])
    acc, acc_update = tf.metrics.accuracy(labels, preds)
    values = tf.placeholder(tf.float32, [None])
    mean, mean_update = tf.metrics.mean(values)
    prec, prec_update = tf.metrics.precision(labels, preds)
    rec, rec_update = tf.metrics.recall(labels, preds)
    assert {v.name for v in tf.local_variables()} >= {"accuracy/total:0", "accuracy/count:0"}
    assert not tf.trainable_variables()
    batches = [([1, 0, 1, 1], [1, 1, 1, 0]), ([0, 0], [0, 1]), ([1], [1])]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run(acc) == 0.0  # nothing seen yet: 0, not NaN
        seen_l, seen_p = [], []
        for lab, pr in batches:
            seen_l += lab
            seen_p += pr
            a = sess.run(acc_update, {labels: lab, preds: pr})
            sess.run([prec_update, rec_update], {labels: lab, preds: pr})
            assert a == pytest.approx(np.mean(np.array(seen_l) == np.array(seen_p)))
        l, p = np.array(seen_l), np.array(seen_p)
        tp = ((l == 1) & (p == 1)).sum()
        assert sess.run(prec) == pytest.approx(tp / (p == 1).sum())
        assert sess.run(rec) == pytest.approx(tp / (l == 1).sum())
        for batch in ([1.0, 2.0], [6.0]):
            sess.run(mean_update, {values: batch})
        assert sess.run(mean) == pytest.approx(3.0)
        sess.run(tf.local_variables_initializer())  # resets
        assert sess.run(acc) == 0.0


def test_learning_rate_schedules_follow_tf1_formulas():
    step = tf.placeholder(tf.int64, [])
    exp = tf.train.exponential_decay(0.1, step, 100, 0.5)
    stair = tf.train.exponential_decay(0.1, step, 100, 0.5, staircase=True)
    poly = tf.train.polynomial_decay(0.1, step, 1000, end_learning_rate=0.01, power=2.0)
    pw = tf.train.piecewise_constant(step, [tf.constant(10, tf.int64), tf.constant(20, tf.int64)],
                                     [1.0, 0.5, 0.1])
    inv = tf.train.inverse_time_decay(0.1, step, 10, 0.5)
    nat = tf.train.natural_exp_decay(0.1, step, 10, 0.5)
    cos = tf.train.cosine_decay(0.1, step, 1000, alpha=0.1)
    with tf.Session() as sess:
        for s in (0, 10, 150, 999, 2000):
            e, st, p, w, i, n, c = sess.run([exp, stair, poly, pw, inv, nat, cos], {step: s})
            assert e == pytest.approx(0.1 * 0.5 ** (s / 100), rel=1e-5)
            assert st == pytest.approx(0.1 * 0.5 ** (s // 100), rel=1e-5)
            cs = min(s, 1000)
            assert p == pytest.approx((0.1 - 0.01) * (1 - cs / 1000) ** 2 + 0.01, rel=1e-5)
            assert w == pytest.approx(1.0 if s <= 10 else 0.5 if s <= 20 else 0.1)
            assert i == pytest.approx(0.1 / (1 + 0.5 * s / 10), rel=1e-5)
            assert n == pytest.approx(0.1 * np.exp(-0.5 * s / 10), rel=1e-4, abs=1e-12)
            assert c == pytest.approx(0.1 * (0.9 * 0.5 * (1 + np.cos(np.pi * cs / 1000)) + 0.1), rel=1e-5)


def test_an_optimizer_takes_a_decaying_learning_rate():
    gs = tf.train.get_or_create_global_step()
    w = tf.Variable(10.0)
    lr = tf.train.exponential_decay(1.0, gs, 1, 0.5)   # 1, 0.5, 0.25, ...
    train = tf.train.GradientDescentOptimizer(lr).minimize(w * 1.0, global_step=gs)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train)
        assert sess.run(w) == pytest.approx(10.0 - 1.0 - 0.5 - 0.25)
        assert tf.train.global_step(sess, gs) == 3


def test_exponential_moving_average_follows_its_variables():
    w = tf.Variable(1.0, name="w")
    ema = tf.train.ExponentialMovingAverage(0.9)
    update = ema.apply([w])
    shadow = ema.average(w)
    assert shadow.name == "w/ExponentialMovingAverage:0"
    assert shadow in tf.moving_average_variables()
    assert ema.average_name(w) == "w/ExponentialMovingAverage"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        ref = 1.0
        for value in (2.0, 5.0, -1.0):
            sess.run(w.assign(value))
            sess.run(update)
            ref -= 0.1 * (ref - value)
            assert sess.run(shadow) == pytest.approx(ref, rel=1e-6)


def test_interactive_session_is_the_default_until_closed():
    x = tf.constant(3.0) * 2.0
    v = tf.Variable(1.0)
    sess = tf.InteractiveSession()
    tf.global_variables_initializer().run()
    assert x.eval() == 6.0
    v.load(4.5)
    assert v.eval() == 4.5
    sess.close()
    with pytest.raises(ValueError, match="default session"):
        x.eval()


def test_saver_without_a_step_writes_the_path_itself(tmp_path):
    v = tf.Variable([1.0, 2.0], name="v")
    loc = tf.Variable(0.0, name="loc", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    saver = tf.train.Saver()
    path = str(tmp_path / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, path) == path
        sess.run(v.assign([7.0, 7.0]))
        saver.restore(sess, path)
        np.testing.assert_allclose(sess.run(v), [1.0, 2.0])
    assert tf.train.checkpoint_exists(path)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == path
    # Local variables are not part of checkpoints.
    del loc
    assert tf.train.latest_checkpoint(str(tmp_path)) == path


def test_gfile_and_logging(tmp_path, capsys):
    d = str(tmp_path / "a" / "b")
    assert not tf.gfile.Exists(d)
    tf.gfile.MakeDirs(d)
    assert tf.gfile.IsDirectory(d)
    with tf.gfile.GFile(os.path.join(d, "f.txt"), "w") as f:
        f.write("hello\n")
    with tf.gfile.Open(os.path.join(d, "f.txt")) as f:
        assert f.read() == "hello\n"
    assert tf.gfile.ListDirectory(d) == ["f.txt"]
    assert tf.gfile.Glob(os.path.join(d, "*.txt")) == [os.path.join(d, "f.txt")]
    with pytest.raises(tf.errors.NotFoundError, match="missing"):
        tf.gfile.GFile(os.path.join(d, "missing"))
    tf.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert not tf.gfile.Exists(d)
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.logging.info("step %d", 7)
    assert "step 7" in capsys.readouterr().err
    tf.logging.set_verbosity(tf.logging.WARN)
    tf.logging.info("hidden")
    assert "hidden" not in capsys.readouterr().err


def test_mnist_readers_take_tf1s_arguments(tmp_path):
    from distflow.contrib.learn.python.learn.datasets import mnist
    from distflow.examples.tutorials.mnist import input_data
    fake = input_data.read_data_sets(str(tmp_path), fake_data=True, one_hot=True)
    images, labels = fake.train.next_batch(5, fake_data=True)
    assert images.shape == (5, 784) and labels.shape == (5, 10)
    raw = mnist.read_data_sets(str(tmp_path), dtype=tf.uint8, reshape=False, validation_size=100)
    assert raw.train.images.dtype == np.uint8 and raw.train.images.shape[1:] == (28, 28, 1)
    assert raw.validation.num_examples == 100
    with pytest.raises(TypeError, match="dtype"):
        mnist.read_data_sets(str(tmp_path), dtype=tf.int32)
    assert tf.contrib.framework.get_or_create_global_step is tf.train.get_or_create_global_step


def test_unknown_names_raise_naming_them():
    with pytest.raises(NotImplementedError, match="tf.layers.conv3d"):
        tf.layers.conv3d
    with pytest.raises(NotImplementedError, match="tf.train.NoSuchThing"):
        tf.train.NoSuchThing


def test_full_trace_fills_run_metadata_and_profiler_hook_writes_timelines(tmp_path):
    import json
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.reduce_sum(tf.matmul(x, tf.ones([3, 2])), name="total")
    meta = tf.RunMetadata()
    with tf.Session() as sess:
        got = sess.run(y, {x: np.ones((2, 3))}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                       run_metadata=meta)
    assert got == 12.0
    events = json.loads(meta.step_stats)["traceEvents"]
    assert any(e.get("name") == "total" or e.get("args", {}).get("name") == "total" for e in events), events[:5]
    tf.reset_default_graph()
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(w * w, global_step=step)
    hooks = [tf.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path)),
             tf.train.StopAtStepHook(last_step=5)]
    with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train)
    timelines = sorted(os.listdir(tmp_path))
    assert timelines == ["timeline-1.json", "timeline-3.json", "timeline-5.json"], timelines
    assert json.loads((tmp_path / "timeline-3.json").read_text())["traceEvents"]


def test_the_readme_table_of_tf1_names_is_current():
    import subprocess
    import sys
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "python", "tools", "tf1_names_table.py")
    r = subprocess.run([sys.executable, tool, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_two_adam_optimizers_in_one_graph_keep_their_own_accumulators():
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(1.0, name="b")
    train_a = tf.train.AdamOptimizer(0.1).minimize(a * a)
    train_b = tf.train.AdamOptimizer(0.1).minimize(b * b)
    names = {v.name for v in tf.global_variables()}
    g = tf.get_default_graph()
    assert g.get_operation_by_name("beta1_power").type == "Variable"
    assert g.get_operation_by_name("beta1_power_1").type == "Variable"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train_a)
        sess.run(train_b)
        sess.run(train_b)
        # Each optimizer's beta powers moved once per its own step.
        assert sess.run("beta1_power:0") == pytest.approx(0.9 ** 2)
        assert sess.run("beta1_power_1:0") == pytest.approx(0.9 ** 3)
        assert sess.run(a) == pytest.approx(0.9, abs=1e-3)
    assert "a:0" in names and "b:0" in names
