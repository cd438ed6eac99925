"""A failed op raises its error once and leaves the graph usable, as in
TensorFlow 1: programs and notebooks catch the exception and go on building
in the same graph. Runs from ctest (python_test) with PYTHONPATH set to the
build's python/ directory."""
import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


A = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_a_caught_shape_error_leaves_the_graph_usable():
    a = tf.constant(A)
    with tf.Session() as sess:  # made before the error: it runs the graph after it too
        with pytest.raises(tf.errors.InvalidArgumentError, match="Matrix size-incompatible"):
            tf.matmul(a, tf.constant(np.ones((4, 5), np.float32)))
        c = tf.constant(np.array([[1.0], [0.0], [2.0]], np.float32))
        y = tf.matmul(a, c)
        assert y.shape.as_list() == [2, 1]
        np.testing.assert_allclose(sess.run(y), A @ np.array([[1.0], [0.0], [2.0]], np.float32))
    # A new session and a variable after a second caught error.
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.reshape(a, [4, 4])
    v = tf.Variable(np.float32(3.0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(v * 2.0) == 6.0


def test_an_error_in_a_cond_branch_leaves_the_graph_usable():
    a = tf.constant(A)
    pred = tf.placeholder(tf.bool, [])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.cond(pred, lambda: tf.matmul(a, a), lambda: a)
    out = tf.cond(pred, lambda: a + 1.0, lambda: a - 1.0)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out, {pred: True}), A + 1.0)
        np.testing.assert_allclose(sess.run(out, {pred: False}), A - 1.0)


def test_training_after_a_caught_error():
    x = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(np.zeros((1, 1), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.matmul(x, tf.constant(np.ones((3, 3), np.float32)))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 2.0 * x))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: np.array([[1.0], [2.0]], np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(50):
            sess.run(train, feed)
        assert abs(sess.run(w)[0, 0] - 2.0) < 1e-3
