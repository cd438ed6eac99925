"""distflow.compat.v1 as a TensorFlow 1.x user meets it: graphs, feeds and
fetches as numpy, devices on a real in-process cluster, errors as TF's
exception classes. Runs from ctest (python_test) with PYTHONPATH set to the
build's python/ directory."""
import gc
import subprocess
import sys

import numpy as np
import pytest

import distflow
import distflow.compat.v1 as tf
from distflow import _distflow, raw_ops


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_hello_world_seed_program():
    # The seeds' first program, unchanged but for the import.
    hello = tf.constant("Hello, distributed TensorFlow!")
    with tf.Session() as sess:
        out = sess.run(hello)
    assert out == b"Hello, distributed TensorFlow!"
    assert distflow.__version__.count(".") == 2


def test_arithmetic_matmul_and_numpy_feeds():
    x = tf.placeholder(tf.float32, shape=[None, 3], name="x")
    w = tf.constant([[1.0], [2.0], [3.0]])
    y = tf.matmul(x, w) * 2.0 + 1.0
    assert y.dtype == tf.float32
    assert y.shape.as_list() == [None, 1]
    batch = np.array([[1, 0, 0], [1, 1, 1]], dtype=np.float32)
    with tf.Session() as sess:
        out = sess.run(y, feed_dict={x: batch})
        # Python lists are accepted with the placeholder's dtype.
        again = sess.run(y, feed_dict={x: [[0, 0, 1]]})
    np.testing.assert_allclose(out, [[3.0], [13.0]])
    np.testing.assert_allclose(again, [[7.0]])
    assert out.dtype == np.float32


def test_fetches_keep_their_nesting():
    a = tf.constant(1)
    b = tf.constant(2.5)
    c = a + 3
    with tf.Session() as sess:
        out = sess.run({"a": a, "pair": (b, [c, a]), "op": tf.group(a)})
    assert out["a"] == 1 and isinstance(out["a"], np.int32)
    assert isinstance(out["pair"], tuple) and out["pair"][0] == np.float32(2.5)
    assert out["pair"][1] == [4, 1]
    assert out["op"] is None


def test_fetched_array_shares_the_tensors_memory_and_keeps_it_alive():
    v = tf.constant(np.arange(1 << 16, dtype=np.float32))
    with tf.Session() as sess:
        arr = sess.run(v)
    # Not a copy: numpy does not own the data, a capsule holding the tensor does.
    assert not arr.flags.owndata
    assert arr.base is not None and type(arr.base).__name__ == "PyCapsule"
    gc.collect()
    assert arr[12345] == 12345.0 and arr[-1] == (1 << 16) - 1


def test_variables_and_initializers():
    v = tf.Variable(tf.constant([1.0, 2.0]), name="v")
    w = tf.Variable(5, name="w")
    inc = v.assign_add([10.0, 10.0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(inc)
        assert list(sess.run(v)) == [11.0, 12.0]
        assert sess.run(w) == 5
        sess.run(tf.initialize_all_variables())
        assert list(sess.run(v)) == [1.0, 2.0]


def test_reductions_casts_and_argmax():
    logits = tf.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 1.0]])
    labels = tf.constant([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    correct = tf.equal(tf.argmax(logits, 1), tf.argmax(labels, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    total = tf.reduce_sum(logits, reduction_indices=[1], keep_dims=True)
    with tf.Session() as sess:
        acc, tot = sess.run([accuracy, total])
    assert acc == pytest.approx(0.5)
    np.testing.assert_allclose(tot, [[8.0], [8.0]])


def test_gradients():
    x = tf.placeholder(tf.float64, shape=[])
    y = x * x * 3.0
    (dy,) = tf.gradients(y, [x])
    with tf.Session() as sess:
        assert sess.run(dy, feed_dict={x: 2.0}) == pytest.approx(12.0)


def test_raw_ops_are_generated_from_the_registry():
    assert "MatMul" in raw_ops.__dict__ and "Conv2D" in raw_ops.__dict__
    assert "transpose_a: bool = false" in raw_ops.MatMul.__doc__
    a = tf.constant([[1.0, 2.0]])
    out = raw_ops.MatMul(a=a, b=a, transpose_b=True)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out), [[5.0]])
    with pytest.raises(TypeError, match="no input or attribute 'transpose_c'"):
        raw_ops.MatMul(a, a, transpose_c=True)
    with pytest.raises(TypeError, match="missing input"):
        raw_ops.MatMul(a)


def test_errors_are_tf_exception_classes_with_the_cpp_message():
    x = tf.placeholder(tf.float32, shape=[2], name="images")
    y = x * 2.0
    with tf.Session() as sess:
        with pytest.raises(ValueError, match="Cannot feed value of shape \\(3,\\) for Tensor 'images:0'"):
            sess.run(y, feed_dict={x: [1, 2, 3]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="images"):
            sess.run(y)  # not fed: the C++ error names the placeholder
        with pytest.raises(TypeError, match="Cannot feed"):
            sess.run(y, feed_dict={x: ["a", "b"]})
    assert issubclass(tf.errors.InvalidArgumentError, tf.errors.OpError)
    with pytest.raises(tf.errors.InvalidArgumentError, match="MatMul.*size-incompatible"):
        tf.matmul(tf.constant([[1.0, 2.0]]), tf.constant([[1.0, 2.0]]))


def test_misuse_raises_python_exceptions():
    a = tf.constant(1.0)
    other = tf.Graph()
    with other.as_default():
        b = tf.constant(2.0)
    sess = tf.Session()
    with pytest.raises(ValueError, match="not an element of this session's graph"):
        sess.run(b)
    with pytest.raises(ValueError, match="same graph"):
        _ = a + b
    sess.close()
    with pytest.raises(tf.errors.FailedPreconditionError, match="closed Session"):
        sess.run(a)
    with pytest.raises(NotImplementedError, match="tf.estimator.DNNClassifier"):
        tf.estimator.DNNClassifier
    with pytest.raises(NotImplementedError, match="tf.nn.conv3d"):
        tf.nn.conv3d
    with pytest.raises(tf.errors.InvalidArgumentError, match="no-port-here.*HOST:PORT"):
        tf.train.ClusterSpec({"ps": ["no-port-here"]})
    with pytest.raises(TypeError):
        bool(a)


def test_cluster_spec_round_trips():
    spec = tf.train.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("worker") == 2
    assert spec.job_tasks("worker") == ["127.0.0.1:2223", "127.0.0.1:2224"]
    assert spec.as_dict() == {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}
    assert tf.train.ClusterSpec(spec) == spec


def test_ps_worker_placement_on_an_in_process_cluster():
    # The seeds' placement program: variables on two ps tasks, the model on
    # a worker, run through the worker's master over the cluster.
    jobs = distflow._distflow.local_cluster_spec(2, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [tf.train.Server(cluster, job_name=j, task_index=i)
               for j in ("ps", "worker") for i in range(cluster.num_tasks(j))]
    with tf.device("/job:ps/task:0"):
        weights_1 = tf.Variable(tf.constant([[1.0, 2.0]]), name="weights_1")
    with tf.device("/job:ps/task:1"):
        weights_2 = tf.Variable(tf.constant([[3.0], [4.0]]), name="weights_2")
    with tf.device("/job:worker/task:0"):
        x = tf.placeholder(tf.float32, shape=[None, 1])
        layer_1 = tf.matmul(x, weights_1)
        out = tf.matmul(layer_1, weights_2)
    assert weights_1.device == "/job:ps/task:0" and out.device == "/job:worker/task:0"
    with tf.Session(servers[2].target) as sess:
        sess.run(tf.global_variables_initializer())
        result = sess.run(out, feed_dict={x: [[1.0], [2.0]]})
    np.testing.assert_allclose(result, [[11.0], [22.0]])
    for s in servers:
        s.stop()


def test_replica_device_setter_places_variables_on_ps_tasks():
    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3"]})
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
        a = tf.Variable(1.0, name="a")
        b = tf.Variable(2.0, name="b")
        c = a + b
    assert a.device.startswith("/job:ps/task:0")
    assert b.device.startswith("/job:ps/task:1")
    assert c.device.startswith("/job:worker/task:0")
    assert tf.train.replica_device_setter(cluster={"worker": ["127.0.0.1:3"]}) is None


def test_python_device_functions_see_the_node():
    seen = []

    def place(op):
        seen.append((op.type, op.name))
        return "/job:ps/task:0" if op.type == "Variable" else "/job:worker/task:0"

    with tf.device(place):
        v = tf.Variable(3.0, name="var")
        y = v * 2.0
    assert v.device == "/job:ps/task:0" and y.device == "/job:worker/task:0"
    assert ("Variable", "var") in seen


def test_name_scopes_and_unique_names():
    with tf.name_scope("layer1"):
        a = tf.constant(1.0, name="c")
        b = tf.constant(2.0, name="c")
    assert a.name == "layer1/c:0"
    assert b.name == "layer1/c_1:0"
    assert tf.constant(3.0).name.startswith("Const")
    assert tf.placeholder(tf.float32, name="x-input").name == "x-input:0"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_get_variable_initializers_and_reuse():
    step = tf.get_variable("global_step", [], initializer=tf.constant_initializer(0), trainable=False)
    assert step.dtype == tf.float32 and step.name == "global_step:0"
    with tf.variable_scope("layer"):
        w = tf.get_variable("w", [3, 2], initializer=tf.truncated_normal_initializer(stddev=0.1))
    with pytest.raises(ValueError, match="layer/w already exists"):
        with tf.variable_scope("layer"):
            tf.get_variable("w", [3, 2])
    with tf.variable_scope("layer", reuse=True):
        assert tf.get_variable("w", [3, 2]) is w
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(step) == 0.0
        values = sess.run(w)
    assert values.shape == (3, 2) and np.all(np.abs(values) <= 0.2 + 1e-6) and np.any(values != 0)


def test_scalar_initializers_of_large_variables_are_fills_not_whole_constants():
    # 3,000,000 floats: a constant would put 12 MB in the graph; a Fill is a
    # few bytes and computes the value where the variable lives.
    table = tf.get_variable("table", [3000, 1000], initializer=tf.zeros_initializer())
    ones = tf.get_variable("ones", [2000, 3], initializer=tf.ones_initializer())
    sevens = tf.get_variable("sevens", [1000, 2], initializer=tf.constant_initializer(7.5))
    small = tf.get_variable("small", [2, 2], initializer=tf.constant_initializer(3))
    listed = tf.get_variable("listed", [2], initializer=tf.constant_initializer([1.0, 2.0]))
    fills = [op for op in tf.get_default_graph().get_operations() if op.type == "Fill"]
    assert len(fills) == 3, [op.name for op in fills]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        t, o, s7, sm, li = sess.run([table, ones, sevens, small, listed])
    assert t.shape == (3000, 1000) and not t.any()
    assert o.shape == (2000, 3) and np.all(o == 1)
    assert np.all(s7 == 7.5) and np.all(sm == 3) and list(li) == [1.0, 2.0]


def test_graph_lists_its_operations_and_gives_its_graph_def():
    with tf.device("/job:ps/task:0"):
        a = tf.constant(1.0, name="a")
    b = tf.add(a, 2.0, name="b")
    with tf.control_dependencies([b]):
        c = tf.identity(a, name="c")
    graph = tf.get_default_graph()
    ops = graph.get_operations()
    assert [op.name for op in ops] == ["a", "Const", "b", "c"], [op.name for op in ops]
    assert [op.type for op in ops] == ["Const", "Const", "Add", "Identity"]
    assert ops[3] == c.op
    nodes = {n.name: n for n in graph.as_graph_def().node}
    assert nodes["a"].device == "/job:ps/task:0"
    assert list(nodes["b"].input) == ["a:0", "Const:0"]
    assert list(nodes["c"].input) == ["a:0", "^b"]
    # It imports into a new graph, as a proto or serialized, and runs there.
    with tf.Graph().as_default() as g2:
        b2, c2 = tf.import_graph_def(graph.as_graph_def(), return_elements=["b:0", "c"], name="copy")
        assert [op.name for op in g2.get_operations()] == ["copy/a", "copy/Const", "copy/b", "copy/c"]
        assert b2.name == "copy/b:0" and c2.type == "Identity"
        tf.import_graph_def(graph.as_graph_def().SerializeToString())
        with tf.Session() as sess:
            assert sess.run(b2) == 3.0 and sess.run("import/b:0") == 3.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a GraphDef"):
        tf.import_graph_def(b"\xff\xff not a graph")
    with pytest.raises(TypeError, match="must be a GraphDef"):
        tf.import_graph_def("not a graph")
    with pytest.raises(NotImplementedError, match="input_map is not supported yet"):
        tf.import_graph_def(graph.as_graph_def(), input_map={"a:0": b})


def test_optimizers_minimize_and_count_steps():
    # Linear regression y = 2x + 1 with each optimizer; a float32 global step
    # (the book's) counts the steps.
    xs = np.linspace(-1, 1, 32, dtype=np.float32).reshape(-1, 1)
    ys = 2 * xs + 1
    for make in (lambda: tf.train.GradientDescentOptimizer(0.5), lambda: tf.train.AdamOptimizer(0.1),
                 lambda: tf.train.MomentumOptimizer(0.1, 0.9), lambda: tf.train.RMSPropOptimizer(0.05),
                 lambda: tf.train.AdagradOptimizer(0.5)):
        tf.reset_default_graph()
        step = tf.get_variable("global_step", [], initializer=tf.constant_initializer(0), trainable=False)
        x = tf.placeholder(tf.float32, [None, 1])
        y = tf.placeholder(tf.float32, [None, 1])
        w = tf.Variable(tf.zeros([1, 1]))
        b = tf.Variable(tf.zeros([1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train = make().minimize(loss, global_step=step)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run(loss, feed_dict={x: xs, y: ys})
            for _ in range(200):
                sess.run(train, feed_dict={x: xs, y: ys})
            last, n = sess.run([loss, step], feed_dict={x: xs, y: ys})
        assert last < 0.05 * first, (make().__class__.__name__, first, last)
        assert n == 200.0


def test_sgd_steps_of_a_deep_net_match_numpy_backprop():
    # Each layer's backprop reads the next layer's weights while the updates
    # of this same step run (the CIFAR-10 tutorial's pattern, with moving
    # averages reading the variables too): every gradient must use the
    # weights from before the step, as a NumPy backprop does.
    rng = np.random.RandomState(7)
    sizes = [32, 192, 192, 192, 8]
    w0 = [rng.randn(a, b) / np.sqrt(a) for a, b in zip(sizes, sizes[1:])]
    xs = [rng.randn(64, sizes[0]) for _ in range(6)]
    ys = [rng.randn(64, sizes[-1]) for _ in range(6)]
    step = tf.train.get_or_create_global_step()
    x = tf.placeholder(tf.float64, [64, sizes[0]])
    y = tf.placeholder(tf.float64, [64, sizes[-1]])
    ws = [tf.Variable(w) for w in w0]
    h = x
    for i, w in enumerate(ws):
        h = tf.matmul(h, w)
        if i < len(ws) - 1:
            h = tf.tanh(h)
    loss = tf.reduce_mean(tf.square(h - y)) + 0.01 * tf.add_n([tf.nn.l2_loss(w) for w in ws])
    opt = tf.train.GradientDescentOptimizer(0.2)
    apply = opt.apply_gradients(opt.compute_gradients(loss), global_step=step)
    averages = tf.train.ExponentialMovingAverage(0.99, step).apply(tf.trainable_variables())
    with tf.control_dependencies([apply, averages]):
        train = tf.no_op()
    ref = [w.copy() for w in w0]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for xb, yb in zip(xs, ys):
            acts = [xb]
            for i, w in enumerate(ref):
                z = acts[-1] @ w
                acts.append(np.tanh(z) if i < len(ref) - 1 else z)
            d = 2 * (acts[-1] - yb) / yb.size
            grads = [None] * len(ref)
            for i in reversed(range(len(ref))):
                grads[i] = acts[i].T @ d + 0.01 * ref[i]
                d = (d @ ref[i].T) * (1 - acts[i] ** 2)
            ref = [w - 0.2 * g for w, g in zip(ref, grads)]
            sess.run(train, feed_dict={x: xb, y: yb})
            for got, want in zip(sess.run(ws), ref):
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_app_flags_parse_the_command_line_on_first_use():
    from distflow.app import _Flags
    flags = _Flags()
    flags._define("job_name", "", "ps or worker", str)
    flags._define("task_index", 0, "index", int)
    flags._define("sync", False, "sync", bool)
    rest = flags._parse(["prog", "--job_name=worker", "--task_index", "2", "--sync", "extra"])
    assert (flags.job_name, flags.task_index, flags.sync) == ("worker", 2, True)
    assert rest == ["prog", "extra"]
    with pytest.raises(AttributeError, match="no flag named --nope"):
        flags.nope
    with pytest.raises(SystemExit):
        flags._parse(["prog", "--task_index=x"])
    with pytest.raises(SystemExit):
        flags._parse(["prog", "--unknown_flag=1"])


def test_input_data_reads_idx_files_with_one_hot_labels(tmp_path, capsys):
    from distflow.examples.tutorials.mnist import input_data
    data = input_data.read_data_sets(str(tmp_path / "MNIST_data"), one_hot=True)
    assert "reading Fashion-MNIST" in capsys.readouterr().err
    assert data.train.images.shape == (55000, 784) and data.train.images.dtype == np.float32
    assert data.test.labels.shape == (10000, 10) and np.all(data.test.labels.sum(axis=1) == 1)
    assert 0.0 <= data.train.images.min() and data.train.images.max() <= 1.0
    seen = set()
    for _ in range(55000 // 500 + 1):
        bx, by = data.train.next_batch(500)
        assert bx.shape == (500, 784) and by.shape == (500, 10)
        seen.add(tuple(bx[0][:20]))
    assert data.train.epochs_completed == 1
    # A damaged file is an error naming it, not a crash.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + b"\x00\x00\x00\x05" * 3 + b"\x01\x02")
    for name in ("train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (bad / name).write_bytes(b"")
    with pytest.raises(ValueError, match="train-images-idx3-ubyte: header says"):
        input_data.read_data_sets(str(bad), one_hot=True)


def test_slim_layers_build_the_books_network():
    from distflow.contrib import slim
    x = tf.placeholder(tf.float32, shape=[None, 784])
    net = tf.reshape(x, [-1, 28, 28, 1])
    net = slim.layers.conv2d(net, 8, [5, 5], scope="conv1")
    net = slim.layers.max_pool2d(net, [2, 2], scope="pool1")
    net = slim.layers.flatten(net, scope="flatten")
    logits = slim.layers.fully_connected(net, 10, activation_fn=None, scope="pred")
    assert logits.shape.as_list() == [None, 10]
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == ["conv1/biases:0", "conv1/weights:0", "pred/biases:0", "pred/weights:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(logits, feed_dict={x: np.random.rand(4, 784)})
    assert out.shape == (4, 10) and np.all(np.isfinite(out))


def test_nn_conv2d_and_max_pool():
    x = tf.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
    w = tf.constant(np.ones((2, 2, 1, 1), dtype=np.float32))
    conv = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="VALID")
    pool = tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    with tf.Session() as sess:
        c, p = sess.run([conv, pool])
    assert c.shape == (1, 3, 3, 1) and c[0, 0, 0, 0] == 0 + 1 + 4 + 5
    np.testing.assert_array_equal(p[0, :, :, 0], [[5, 7], [13, 15]])
    assert sess.run is not None and tf.nn.sigmoid(tf.constant(0.0)).dtype == tf.float32


def test_monitored_training_session_stops_at_step_and_checkpoints(tmp_path):
    step = tf.train.get_or_create_global_step()
    assert step.dtype == tf.int64
    w = tf.Variable(5.0)
    loss = tf.square(w)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    hooks = [tf.train.StopAtStepHook(last_step=30)]
    with tf.train.MonitoredTrainingSession(is_chief=True, checkpoint_dir=str(tmp_path), hooks=hooks) as sess:
        n = 0
        while not sess.should_stop():
            sess.run(train)
            n += 1
    assert n == 30
    # The chief saved a checkpoint at the end; a new session restores it.
    assert any(f.startswith("model.ckpt-30") for f in __import__("os").listdir(tmp_path))
    tf.reset_default_graph()
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(5.0)
    with tf.train.MonitoredTrainingSession(is_chief=True, checkpoint_dir=str(tmp_path)) as sess:
        assert sess.run(step) == 30
        assert abs(sess.run(w)) < 5.0 * 0.8 ** 29


def test_saver_saves_restores_and_refuses_another_model(tmp_path):
    v = tf.Variable([1.0, 2.0], name="v")
    step = tf.Variable(0, name="step", trainable=False)
    bump = tf.group(v.assign_add([1.0, 1.0]), step.assign_add(1))
    saver = tf.train.Saver(max_to_keep=2)
    prefixes = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(bump)
            prefixes.append(saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step))
        assert prefixes[-1].endswith("model.ckpt-3")
        assert tf.train.latest_checkpoint(str(tmp_path)) == prefixes[-1]
        sess.run(bump)
        saver.restore(sess, prefixes[-1])
        np.testing.assert_allclose(sess.run(v), [4.0, 5.0])
        assert sess.run(step) == 3
    # max_to_keep=2: the first checkpoint is gone.
    assert not any(f.startswith("model.ckpt-1.") for f in __import__("os").listdir(tmp_path))
    assert tf.train.latest_checkpoint(str(tmp_path / "empty")) is None
    tf.reset_default_graph()
    tf.Variable([1.0, 2.0, 3.0], name="v")  # another shape
    other = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="v"):
            other.restore(sess, prefixes[-1])


def test_sync_replicas_optimizer_refuses_bad_arguments_with_clear_errors():
    # In a fresh process: this one keeps the servers earlier tests started.
    fresh = subprocess.run([sys.executable, "-c", "import distflow.compat.v1 as tf\n"
                            "tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)"],
                           capture_output=True, text=True, timeout=60)
    assert fresh.returncode == 1
    assert "ValueError: SyncReplicasOptimizer: this process has no tf.train.Server of job 'worker'" in fresh.stderr
    assert "pass replica_id=<this worker's task index>" in fresh.stderr
    gd = tf.train.GradientDescentOptimizer(0.1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="replicas_to_aggregate must be at least 1, got 0"):
        tf.train.SyncReplicasOptimizer(gd, replicas_to_aggregate=0, replica_id=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"larger than total_num_replicas \(1\)"):
        tf.train.SyncReplicasOptimizer(gd, replicas_to_aggregate=2, total_num_replicas=1, replica_id=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"replica_id 5 is not in \[0, 2\)"):
        tf.train.SyncReplicasOptimizer(gd, replicas_to_aggregate=2, replica_id=5)
    with pytest.raises(TypeError, match="wraps one of distflow's optimizers, not int"):
        tf.train.SyncReplicasOptimizer(3, 2)
    with pytest.raises(NotImplementedError, match="variable_averages"):
        tf.train.SyncReplicasOptimizer(gd, 2, variable_averages=object(), replica_id=0)
    sync = tf.train.SyncReplicasOptimizer(gd, replicas_to_aggregate=2, replica_id=1)
    with tf.Graph().as_default():
        w = tf.Variable(1.0)
        with pytest.raises(ValueError, match="needs global_step"):
            sync.minimize(w * w)
    assert sync.steps_applied == 0


def test_a_fed_array_is_lent_not_copied_and_a_variable_never_aliases_it():
    a = np.arange(1 << 18, dtype=np.float32).reshape(512, 512)
    x = tf.placeholder(tf.float32, [None, 512], name="x")
    v = tf.Variable(tf.zeros([512, 512]))
    assign = v.assign(x)
    bump = v.assign_add(tf.ones([512, 512]))
    with tf.Session() as sess:
        sess.run(v.initializer)
        refs = sys.getrefcount(a)
        out = sess.run(x, {x: a})
        # The feed was not copied on the way in, nor the fetch on the way out.
        assert np.shares_memory(out, a)
        assert sys.getrefcount(a) == refs + 1  # held by the fetched array's tensor
        del out
        gc.collect()
        assert sys.getrefcount(a) == refs
        # A variable assigned from a lent array copies it: the caller's later
        # writes do not reach the variable, and the variable's updates do not
        # reach the caller's array.
        sess.run(assign, {x: a})
        a[0, 0] = -7.0
        sess.run(bump)
        got = sess.run(v)
        assert got[0, 0] == 1.0 and got[1, 1] == 514.0
        assert a[0, 0] == -7.0 and a[1, 1] == 513.0
        assert not np.shares_memory(got, a)
        assert sys.getrefcount(a) == refs
        # What cannot be lent is copied: another dtype, a strided view.
        assert not np.shares_memory(sess.run(x, {x: a.astype(np.float64)}), a)
        wide = np.zeros((512, 1024), dtype=np.float32)
        assert not np.shares_memory(sess.run(x, {x: wide[:, ::2]}), wide)
        assert _distflow._lent_arrays_pending() == 0


def test_fetches_and_feeds_by_name():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.identity(x * 2.0, name="y")
        v = tf.Variable(0.0, name="v")
        tf.assign_add(v, 1.0, name="inc")
    assert g.get_tensor_by_name("y:0").name == y.name == "y:0"
    assert g.get_operation_by_name("inc").type == "AssignAdd"
    with pytest.raises(KeyError, match="The operation, 'nope', does not exist in the graph"):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="exists but only has 1 outputs"):
        g.get_tensor_by_name("y:3")
    with pytest.raises(ValueError, match="looks like an Operation name, not a Tensor"):
        g.get_tensor_by_name("y")
    with tf.Session(graph=g) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run("y:0", {"x:0": [1.0, 2.0]}), [2.0, 4.0])
        out = sess.run({"doubled": "y:0", "step": "inc"}, feed_dict={x: [3.0, 4.0]})
        assert out["step"] is None
        np.testing.assert_array_equal(out["doubled"], [6.0, 8.0])
        assert sess.run("v:0") == 1.0
        with pytest.raises(KeyError, match="refers to an Operation not in the graph"):
            sess.run("missing")


def test_session_run_hooks_follow_tensorflows_protocol(tmp_path, capsys):
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(5.0, name="w")
    loss = tf.square(w, name="loss")
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    calls = []

    class Recorder(tf.train.SessionRunHook):
        def begin(self):
            calls.append("begin")
            self._w2 = tf.multiply(w, 2.0, name="w_doubled")  # hooks may add ops in begin()

        def after_create_session(self, session, coord):
            calls.append(("created", int(session.run(step))))

        def before_run(self, run_context):
            assert run_context.original_args.fetches is train
            return tf.train.SessionRunArgs({"w2": self._w2, "step": step})

        def after_run(self, run_context, run_values):
            calls.append(("step", int(run_values.results["step"]), float(run_values.results["w2"])))
            if run_values.results["step"] >= 4:
                run_context.request_stop()

        def end(self, session):
            calls.append(("end", int(session.run(step))))

    final = tf.train.FinalOpsHook(loss)
    logging = tf.train.LoggingTensorHook({"the_loss": "loss:0"}, every_n_iter=2)
    hooks = [Recorder(), final, logging]
    with tf.train.MonitoredTrainingSession(is_chief=True, checkpoint_dir=str(tmp_path), hooks=hooks) as sess:
        n = 0
        while not sess.should_stop():
            assert sess.run(train) is None
            n += 1
    assert calls[0] == "begin" and calls[1] == ("created", 0)
    steps = [c for c in calls if c[0] == "step"]
    # One step each: the hook's fetches ran with the train op (w read before or after its update).
    assert n == len(steps) == 5
    assert [s[1] for s in steps][-1] >= 4
    assert calls[-1] == ("end", 5)
    assert abs(final.final_ops_values - 25.0 * 0.8 ** 10) < 1e-3
    logged = [line for line in capsys.readouterr().out.splitlines() if line.startswith("the_loss = ")]
    assert len(logged) == 3  # steps 0, 2 and 4


def test_nan_tensor_hook_fails_the_training_with_tensorflows_error(tmp_path):
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    loss = tf.log(w - 2.0)  # NaN from the first step
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w), global_step=step)
    with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss during training"):
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                               hooks=[tf.train.NanTensorHook(loss)]) as sess:
            sess.run(train)
    tf.reset_default_graph()
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(1.0)
    loss = tf.log(w - 2.0)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w), global_step=step)
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path / "b"),
                                           hooks=[tf.train.NanTensorHook(loss, fail_on_nan_loss=False)]) as sess:
        sess.run(train)
        assert sess.should_stop()


def test_create_local_server_is_job_local_and_places_as_tensorflow_does():
    server = tf.train.Server.create_local_server()
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:local/task:0/cpu:0"):  # TF1's legacy "/cpu:0" spelling
            on_cpu = tf.constant(2.0) * 2
        with tf.device("/job:local/task:0/gpu:0"):
            on_gpu = tf.constant(3.0) * 2
    with tf.Session(server.target, graph=g) as sess:
        assert sess.run(on_cpu) == 4.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="set allow_soft_placement"):
            sess.run(on_gpu)
    config = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(server.target, graph=g, config=config) as sess:
        assert sess.run(on_gpu) == 6.0


def test_a_stopped_server_is_refused_at_once_not_waited_for():
    import threading
    import time
    server = tf.train.Server.create_local_server()
    joiner = threading.Thread(target=server.join)
    joiner.start()
    server.stop()
    joiner.join(timeout=30)
    assert not joiner.is_alive(), "join() returns once the server is stopped"
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0)
    start = time.monotonic()
    with pytest.raises(tf.errors.UnavailableError, match="in this process has stopped.*start a new Server"):
        with tf.Session(server.target, graph=g) as sess:
            sess.run(c)
    assert time.monotonic() - start < 10, "a stopped server of this process is not waited for"
    with pytest.raises(tf.errors.FailedPreconditionError, match="was stopped and cannot start again"):
        server.start()


def test_a_fed_placeholder_is_a_gradient_as_it_is():
    # Gradients computed elsewhere (another framework, a worker's numpy) and
    # fed in: the optimizer gates its updates on them; the feed satisfies it.
    w = tf.Variable([1.0, 2.0])
    g = tf.placeholder(tf.float32, [2])
    train = tf.train.GradientDescentOptimizer(0.5).apply_gradients([(g, w)])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, feed_dict={g: np.array([2.0, -4.0], np.float32)})
        np.testing.assert_allclose(sess.run(w), [0.0, 4.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="must feed a value for placeholder"):
            sess.run(train)


def test_a_fed_placeholder_gradient_for_a_variable_on_a_ps():
    jobs = distflow._distflow.local_cluster_spec(1, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [tf.train.Server(cluster, job_name=j, task_index=0) for j in ("ps", "worker")]
    with tf.device("/job:ps/task:0"):
        w = tf.Variable([1.0, 2.0])
    with tf.device("/job:worker/task:0"):
        g = tf.placeholder(tf.float32, [2])
    train = tf.train.GradientDescentOptimizer(0.5).apply_gradients([(g, w)])
    with tf.Session(servers[1].target) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, feed_dict={g: np.array([2.0, -4.0], np.float32)})
        np.testing.assert_allclose(sess.run(w), [0.0, 4.0])
    for s in servers:
        s.stop()
