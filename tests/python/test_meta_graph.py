"""tf.train.export_meta_graph / import_meta_graph and the .meta file
Saver.save writes: a program rebuilds its model from the file alone and
restores a checkpoint into it, as TF1 programs do."""
import os

import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _build_and_train(logdir, steps=5):
    tf.set_random_seed(7)
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    with tf.variable_scope("model"):
        hidden = tf.layers.dense(x, 8, activation=tf.nn.relu, name="hidden")
        logits = tf.layers.dense(hidden, 3, name="logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=step)
    tf.add_to_collection("train_op", train_op)
    tf.add_to_collection("logits", logits)
    tf.add_to_collection("notes", "a string survives")
    saver = tf.train.Saver()
    rng = np.random.RandomState(0)
    feed = {x: rng.randn(16, 4).astype(np.float32), y: rng.randint(0, 3, 16)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(steps):
            sess.run(train_op, feed)
        prefix = saver.save(sess, os.path.join(logdir, "model.ckpt"), global_step=step)
        want_logits, want_loss = sess.run([logits, loss], feed)
    names = sorted(v.name for v in tf.trainable_variables())
    return prefix, {k.name: v for k, v in feed.items()}, want_logits, want_loss, names


def test_a_model_rebuilt_from_its_meta_file_restores_and_trains(tmp_path):
    prefix, feed, want_logits, want_loss, trainable = _build_and_train(str(tmp_path))
    assert prefix.endswith("model.ckpt-5")
    assert os.path.exists(prefix + ".meta")
    tf.reset_default_graph()  # the program that built the model is gone
    saver = tf.train.import_meta_graph(prefix + ".meta")
    assert saver is not None
    graph = tf.get_default_graph()
    assert sorted(v.name for v in tf.trainable_variables()) == trainable
    assert graph.get_collection("notes") == ["a string survives"]
    logits = graph.get_collection("logits")[0]
    train_op = graph.get_collection("train_op")[0]
    step = tf.train.get_global_step()
    assert step is not None and step.name == "global_step:0"
    loss = graph.get_collection(tf.GraphKeys.LOSSES)[0]
    feed = {graph.get_tensor_by_name(k): v for k, v in feed.items()}
    with tf.Session() as sess:
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(logits, feed), want_logits)
        assert sess.run(step) == 5
        sess.run(train_op, feed)  # the imported optimizer keeps training
        assert sess.run(step) == 6
        assert sess.run(loss, feed) < want_loss


def test_the_imported_initializer_initializes_every_imported_variable(tmp_path):
    v = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
    w = tf.get_variable("w", [3], initializer=tf.constant_initializer(2.5))
    tf.add_to_collection("out", tf.reduce_sum(v * w, name="out"))
    path = str(tmp_path / "graph.meta")
    tf.train.export_meta_graph(path)

    tf.reset_default_graph()
    tf.train.import_meta_graph(path, import_scope="copy")
    out = tf.get_collection("out")[0]
    assert out.name == "copy/out:0"
    assert sorted(v.name for v in tf.global_variables()) == ["copy/v:0", "copy/w:0"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(out) == pytest.approx(2.5 * 15)


def test_a_checkpoint_dropped_by_max_to_keep_takes_its_meta_file_along(tmp_path):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in (1, 2, 3):
            saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
    metas = sorted(f for f in os.listdir(tmp_path) if f.endswith(".meta"))
    assert metas == ["model.ckpt-3.meta"]
    assert v.name == "v:0"


def test_a_file_that_is_not_a_meta_graph_is_a_clear_error(tmp_path):
    with pytest.raises(OSError, match="no such file"):
        tf.train.import_meta_graph(str(tmp_path / "missing.meta"))
    binary = tmp_path / "tf.meta"
    binary.write_bytes(b"\x0a\x86\x01\x12\x83\x01\xff\xfe")
    with pytest.raises(ValueError, match="is not a distflow meta graph"):
        tf.train.import_meta_graph(str(binary))
    damaged = tmp_path / "damaged.meta"
    damaged.write_text('{"format": "distflow.MetaGraph", "version": 1, "graph_def": "!!!"}')
    with pytest.raises(ValueError, match="graph_def is missing or damaged"):
        tf.train.import_meta_graph(str(damaged))
    # The graph took no half-imported nodes: it still builds and runs.
    c = tf.constant(3.0) * 2.0
    with tf.Session() as sess:
        assert sess.run(c) == 6.0


# A GraphDef written byte by byte from the format (proto/graph.proto), so
# the test needs no generated classes: a while loop summing start, start +
# 1, ... below limit, in TensorFlow's own node form (Enter, Merge, Switch,
# LoopCond, NextIteration, Exit), its Merge listed before the NextIteration
# that feeds it back.
def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    if isinstance(payload, int):  # varint field
        return _varint(number << 3) + _varint(payload)
    payload = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _node(name, op, inputs=(), **attrs):
    out = _field(1, name) + _field(2, op) + b"".join(_field(3, i) for i in inputs)
    for key, (kind, value) in sorted(attrs.items()):
        # AttrValue: i = 1, b = 3, s = 4, type = 5 (DT_INT32 = 3), shape = 6
        number = {"i": 1, "b": 3, "s": 4, "type": 5, "shape": 6}[kind]
        entry = _field(1, key) + _field(2, _field(number, value))
        out += _field(5, entry)
    return out


def _while_loop_graph_def():
    i32 = ("type", 3)
    frame = ("s", "while")
    nodes = [
        _node("start", "Placeholder", dtype=i32, shape=("shape", b"")),  # a scalar
        _node("limit", "Placeholder", dtype=i32, shape=("shape", b"")),
        _node("one", "Placeholder", dtype=i32, shape=("shape", b"")),
        _node("while/Enter", "Enter", ["start"], T=i32, frame_name=frame, is_constant=("b", 0),
              parallel_iterations=("i", 10)),
        _node("while/Enter_1", "Enter", ["limit"], T=i32, frame_name=frame, is_constant=("b", 1),
              parallel_iterations=("i", 10)),
        _node("while/Enter_2", "Enter", ["one"], T=i32, frame_name=frame, is_constant=("b", 1),
              parallel_iterations=("i", 10)),
        _node("while/Enter_3", "Enter", ["start"], T=i32, frame_name=frame, is_constant=("b", 0),
              parallel_iterations=("i", 10)),
        _node("while/Merge", "Merge", ["while/Enter", "while/NextIteration"], T=i32, N=("i", 2)),
        _node("while/Merge_1", "Merge", ["while/Enter_3", "while/NextIteration_1"], T=i32, N=("i", 2)),
        _node("while/Less", "Less", ["while/Merge", "while/Enter_1"], T=i32),
        _node("while/LoopCond", "LoopCond", ["while/Less"]),
        _node("while/Switch", "Switch", ["while/Merge", "while/LoopCond"], T=i32),
        _node("while/Switch_1", "Switch", ["while/Merge_1", "while/LoopCond"], T=i32),
        _node("while/Identity", "Identity", ["while/Switch:1"], T=i32),
        _node("while/Identity_1", "Identity", ["while/Switch_1:1"], T=i32),
        _node("while/add", "Add", ["while/Identity", "while/Enter_2"], T=i32),
        _node("while/sum", "Add", ["while/Identity_1", "while/add"], T=i32),
        _node("while/NextIteration", "NextIteration", ["while/add"], T=i32),
        _node("while/NextIteration_1", "NextIteration", ["while/sum"], T=i32),
        _node("while/Exit", "Exit", ["while/Switch"], T=i32),
        _node("while/Exit_1", "Exit", ["while/Switch_1"], T=i32),
    ]
    return b"".join(_field(1, n) for n in nodes)


def test_a_meta_graph_with_a_while_loop_imports_runs_and_exports_again(tmp_path):
    import base64
    meta = {"format": "distflow.MetaGraph", "version": 1,
            "graph_def": base64.b64encode(_while_loop_graph_def()).decode("ascii"),
            "collections": {"outputs": [{"tensor": "while/Exit:0"}, {"tensor": "while/Exit_1:0"}]}}
    assert tf.train.import_meta_graph(meta, import_scope="imported") is None  # no variables, as TF
    graph = tf.get_default_graph()
    last, total = graph.get_collection("outputs")
    assert last.name == "imported/while/Exit:0"
    start, limit, one = (graph.get_tensor_by_name(f"imported/{n}:0") for n in ("start", "limit", "one"))

    def run(sess, a, b):
        return sess.run([last, total], {start: a, limit: b, one: 1})

    with tf.Session() as sess:
        # i runs a, a + 1, ..., up to limit; total = a + (a + 1) + ... + limit.
        assert run(sess, 0, 10) == [10, sum(range(0, 11))]
        assert run(sess, 3, 3) == [3, 3]  # the body never runs
        assert run(sess, -5, 2) == [2, sum(range(-5, 3))]
    # The imported loop exports and imports again, into another graph.
    path = str(tmp_path / "loop.meta")
    tf.train.export_meta_graph(path)
    tf.reset_default_graph()
    tf.train.import_meta_graph(path)
    graph = tf.get_default_graph()
    last, total = graph.get_collection("outputs")
    with tf.Session() as sess:
        got = sess.run([last, total], {graph.get_tensor_by_name(f"imported/{n}:0"): v
                                       for n, v in (("start", 1), ("limit", 4), ("one", 1))})
    assert got == [4, 1 + 2 + 3 + 4]


def test_a_cycle_that_is_not_a_loop_is_refused_naming_a_node():
    import base64
    cycle = b"".join(_field(1, n) for n in [
        _node("p", "Identity", ["q"], T=("type", 3)), _node("q", "Identity", ["p"], T=("type", 3))])
    meta = {"format": "distflow.MetaGraph", "version": 1, "graph_def": base64.b64encode(cycle).decode("ascii")}
    with pytest.raises(tf.errors.InvalidArgumentError, match="cycle through '[pq]' that is not a while loop"):
        tf.train.import_meta_graph(meta)
