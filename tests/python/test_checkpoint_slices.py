"""Checkpoints of partitioned variables as TF writes them: each part is
saved as a slice of the full variable (its save_slice_info), and restores
into another number of parts, into one part, or into an unpartitioned
variable of the full shape, optimizer slots included, values equal row by
row; a different full shape is an error naming the variable and both
shapes; a damaged or truncated slice is a DataLossError naming the file."""
import glob
import os

import numpy as np
import pytest

import distflow.compat.v1 as tf

FULL = np.arange(30, dtype=np.float32).reshape(10, 3) / 10


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _model(parts, init, rows=10):
    """A [rows, 3] table in `parts` parts (None: unpartitioned) with an Adagrad step."""
    partitioner = tf.fixed_size_partitioner(parts) if parts else None
    emb = tf.get_variable("emb", [rows, 3], initializer=init, partitioner=partitioner)
    loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, [0, 9, 4, 9], partition_strategy="div")))
    train = tf.train.AdagradOptimizer(0.1).minimize(loss)
    g = tf.get_default_graph()
    if parts:
        accum = tf.concat([g.get_tensor_by_name(f"emb/part_{k}/Adagrad:0") for k in range(len(emb))], 0)
    else:
        accum = g.get_tensor_by_name("emb/Adagrad:0")
    return tf.convert_to_tensor(emb), accum, train


def _save_4_parts(tmp_path):
    whole, accum, train = _model(4, FULL)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        want = sess.run([whole, accum])
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert not np.array_equal(want[0], FULL)  # the step changed the table
    tf.reset_default_graph()
    return path, want


@pytest.mark.parametrize("parts", [3, 1, None])
def test_4_parts_restore_into_other_partitionings_row_by_row(tmp_path, parts):
    path, (want_emb, want_accum) = _save_4_parts(tmp_path)
    whole, accum, _ = _model(parts, np.zeros((10, 3), np.float32))
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.restore(sess, path)
        got_emb, got_accum = sess.run([whole, accum])
    for r in range(10):
        np.testing.assert_array_equal(got_emb[r], want_emb[r], err_msg=f"row {r}")
        np.testing.assert_array_equal(got_accum[r], want_accum[r], err_msg=f"accumulator row {r}")


def test_unpartitioned_restores_into_parts(tmp_path):
    whole, accum, train = _model(None, FULL)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        want = sess.run([whole, accum])
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=1)
    tf.reset_default_graph()
    whole, accum, _ = _model(3, np.zeros((10, 3), np.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().restore(sess, path)
        got = sess.run([whole, accum])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_another_full_shape_names_the_variable_and_both_shapes(tmp_path):
    path, _ = _save_4_parts(tmp_path)
    _model(3, np.zeros((12, 3), np.float32), rows=12)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.FailedPreconditionError) as e:
            tf.train.Saver().restore(sess, path)
    assert "emb/part_0: a slice of 'emb' of shape [12,3] in the model" in str(e.value)
    assert "the checkpoint's 'emb' has shape [10,3]" in str(e.value)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_slice_is_a_data_loss_error_naming_the_file(tmp_path, damage):
    path, _ = _save_4_parts(tmp_path)
    (data,) = glob.glob(path + ".data-*")
    size = os.path.getsize(data)
    if damage == "truncate":
        os.truncate(data, size // 2)
    else:
        with open(data, "r+b") as f:
            f.seek(4)
            byte = f.read(1)
            f.seek(4)
            f.write(bytes([byte[0] ^ 0xFF]))
    _model(3, np.zeros((10, 3), np.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.DataLossError, match=r"model\.ckpt\.data-00000-of-00001"):
            tf.train.Saver().restore(sess, path)


def test_monitored_training_session_checkpoints_repartition(tmp_path):
    # The C++ monitored session's own saver records the slices too.
    whole, accum, train = _model(4, FULL)
    tf.train.get_or_create_global_step()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        sess.run(train)
        want = sess.run([whole, accum])
    path = tf.train.latest_checkpoint(str(tmp_path))
    assert path is not None
    tf.reset_default_graph()
    whole, accum, _ = _model(3, np.zeros((10, 3), np.float32))
    tf.train.get_or_create_global_step()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
        got = sess.run([whole, accum])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
