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
