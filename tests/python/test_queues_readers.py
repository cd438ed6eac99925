"""TF1's input pipeline before tf.data: TFRecord files, tf.train.Example
parsing, queues, readers, queue runners, batching and the CIFAR-10
tutorial's image ops, checked against NumPy; a queue on a ps task shared by
two workers of an in-process cluster; the errors of bad input."""
import os
import threading

import numpy as np
import pytest

import distflow
import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _example(label, raw, floats=()):
    return tf.train.Example(features=tf.train.Features(feature={
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
        "raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw])),
        "floats": tf.train.Feature(float_list=tf.train.FloatList(value=list(floats))),
    }))


def _write(path, records, options=None):
    with tf.python_io.TFRecordWriter(str(path), options=options) as w:
        for r in records:
            w.write(r)


@pytest.mark.parametrize("compression", [None, tf.python_io.TFRecordCompressionType.GZIP, "ZLIB"])
def test_tfrecord_round_trip(tmp_path, compression):
    options = None if compression is None else tf.python_io.TFRecordOptions(compression)
    records = [b"", b"a", os.urandom(5000), _example(3, b"xy").SerializeToString()]
    _write(tmp_path / "r.tfrecord", records, options)
    assert list(tf.python_io.tf_record_iterator(str(tmp_path / "r.tfrecord"), options)) == records


def test_corrupt_tfrecord_names_file_and_offset(tmp_path):
    path = tmp_path / "bad.tfrecord"
    _write(path, [b"first", b"second"])
    data = bytearray(path.read_bytes())
    data[12 + 5 + 4 + 12 + 1] ^= 0xFF  # a byte of "second"
    path.write_bytes(bytes(data))
    it = tf.python_io.tf_record_iterator(str(path))
    assert next(it) == b"first"
    with pytest.raises(tf.errors.DataLossError, match=r"bad\.tfrecord' at byte offset 21"):
        next(it)


def test_example_bytes_match_tensorflows_field_numbers():
    # Field numbers as TensorFlow's feature.proto: Example.features=1,
    # Features.feature=1 (map), Feature.int64_list=3, Int64List.value=1 (packed).
    e = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[5]))}))
    assert e.SerializeToString() == b"\n\x0c\n\n\n\x01a\x12\x05\x1a\x03\n\x01\x05"


def test_parse_single_example_and_decode_raw():
    image = np.arange(12, dtype=np.uint8)
    serialized = tf.placeholder(tf.string, [])
    parsed = tf.parse_single_example(serialized, {
        "label": tf.FixedLenFeature([], tf.int64),
        "raw": tf.FixedLenFeature([], tf.string),
        "floats": tf.VarLenFeature(tf.float32),
        "missing": tf.FixedLenFeature([2], tf.float32, default_value=[0.5, 1.5]),
    })
    pixels = tf.decode_raw(parsed["raw"], tf.uint8)
    pixels.set_shape([12])
    assert pixels.shape.as_list() == [12]
    assert isinstance(parsed["floats"], tf.SparseTensor)
    with tf.Session() as sess:
        label, px, idx, vals, shape, missing = sess.run(
            [parsed["label"], pixels, parsed["floats"].indices, parsed["floats"].values,
             parsed["floats"].dense_shape, parsed["missing"]],
            {serialized: _example(7, image.tobytes(), [1.0, 2.0, 3.0]).SerializeToString()})
        assert label == 7
        np.testing.assert_array_equal(px, image)
        np.testing.assert_array_equal(idx, [[0], [1], [2]])
        np.testing.assert_allclose(vals, [1, 2, 3])
        np.testing.assert_array_equal(shape, [3])
        np.testing.assert_allclose(missing, [0.5, 1.5])
        with pytest.raises(tf.errors.InvalidArgumentError, match="not a tf.train.Example"):
            sess.run(parsed["label"], {serialized: b"\xff\xff"})
        # The session still serves.
        assert sess.run(parsed["label"], {serialized: _example(1, b"").SerializeToString()}) == 1


def test_parse_example_batch_against_numpy():
    examples = [_example(i, bytes([i]), range(i)).SerializeToString() for i in range(4)]
    parsed = tf.parse_example(tf.constant(examples), {"label": tf.FixedLenFeature([1], tf.int64),
                                                       "floats": tf.VarLenFeature(tf.float32)})
    with tf.Session() as sess:
        label, idx, vals, shape = sess.run([parsed["label"], parsed["floats"].indices, parsed["floats"].values,
                                            parsed["floats"].dense_shape])
    np.testing.assert_array_equal(label, np.arange(4).reshape(4, 1))
    want_idx = [[b, k] for b in range(4) for k in range(b)]
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_allclose(vals, [k for b in range(4) for k in range(b)])
    np.testing.assert_array_equal(shape, [4, 3])


def test_fifo_queue_errors_name_the_queue_and_the_session_keeps_serving():
    q = tf.FIFOQueue(4, [tf.float32, tf.int32], shapes=[[2], []], name="inputs")
    x = tf.placeholder(tf.float32, [None])
    enqueue = q.enqueue([x, tf.constant(1)])
    dequeue = q.dequeue_many(2)
    close = q.close()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Queue 'inputs': component 0 has shape \[3\]"):
            sess.run(enqueue, {x: [1, 2, 3]})
        sess.run(enqueue, {x: [1, 2]})
        sess.run(enqueue, {x: [3, 4]})
        a, b = sess.run(dequeue)
        np.testing.assert_allclose(a, [[1, 2], [3, 4]])
        np.testing.assert_array_equal(b, [1, 1])
        sess.run(close)
        with pytest.raises(tf.errors.OutOfRangeError, match="Queue 'inputs' is closed"):
            sess.run(dequeue)
        with pytest.raises(tf.errors.CancelledError, match="Queue 'inputs' is closed"):
            sess.run(enqueue, {x: [1, 2]})
    with pytest.raises(ValueError, match="int32"):
        q.enqueue([tf.constant([1, 2]), tf.constant(1)])


def test_blocked_dequeue_is_released_by_another_threads_enqueue():
    q = tf.FIFOQueue(10, tf.int32, shapes=[])
    x = tf.placeholder(tf.int32, [])
    enqueue, dequeue = q.enqueue(x), q.dequeue_many(3)
    with tf.Session() as sess:
        result = []
        t = threading.Thread(target=lambda: result.append(sess.run(dequeue)))
        t.start()
        for i in range(3):
            sess.run(enqueue, {x: i})
        t.join(30)
        assert not t.is_alive()
        np.testing.assert_array_equal(result[0], [0, 1, 2])


def test_tfrecord_reader_pipeline_reads_every_record_once(tmp_path):
    files = []
    for f in range(3):
        files.append(str(tmp_path / f"part{f}.tfrecord"))
        _write(files[-1], [_example(f * 10 + i, b"").SerializeToString() for i in range(5)])
    filename_queue = tf.train.string_input_producer(files, num_epochs=1, shuffle=True, seed=3)
    _, serialized = tf.TFRecordReader().read(filename_queue)
    label = tf.parse_single_example(serialized, {"label": tf.FixedLenFeature([], tf.int64)})["label"]
    batch = tf.train.batch([label], batch_size=4, num_threads=2, allow_smaller_final_batch=True)
    seen = []
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while True:
                seen.extend(sess.run(batch)[0].tolist())
        except tf.errors.OutOfRangeError:
            pass
        coord.request_stop()
        coord.join(threads)
    assert sorted(seen) == sorted(f * 10 + i for f in range(3) for i in range(5))


def test_fixed_length_reader_skips_header_and_footer(tmp_path):
    path = tmp_path / "fixed.bin"
    records = np.arange(5 * 3, dtype=np.uint8).reshape(5, 3)
    path.write_bytes(b"HDR" + records.tobytes() + b"FT")
    queue = tf.FIFOQueue(2, tf.string, shapes=[])
    enqueue, close = queue.enqueue(str(path)), queue.close()
    key, value = tf.FixedLengthRecordReader(record_bytes=3, header_bytes=3, footer_bytes=2).read(queue)
    decoded = tf.decode_raw(value, tf.uint8)
    with tf.Session() as sess:
        sess.run(enqueue)
        sess.run(close)
        got = [sess.run([key, decoded]) for _ in range(5)]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(decoded)
    assert got[1][0] == f"{path}:1".encode()
    np.testing.assert_array_equal(np.stack([g[1] for g in got]), records)


def test_whole_file_and_text_line_readers(tmp_path):
    (tmp_path / "a.txt").write_text("header\nline one\nline two\n")
    files = tf.train.string_input_producer([str(tmp_path / "a.txt")], num_epochs=1, shuffle=False)
    _, line = tf.TextLineReader(skip_header_lines=1).read(files)
    whole_q = tf.FIFOQueue(1, tf.string, shapes=[])
    _, whole = tf.WholeFileReader().read(whole_q)
    with tf.Session() as sess:
        threads = tf.train.start_queue_runners(sess)
        assert sess.run(line) == b"line one"
        assert sess.run(line) == b"line two"
        sess.run(whole_q.enqueue(str(tmp_path / "a.txt")))
        assert sess.run(whole) == b"header\nline one\nline two\n"
        for t in threads:
            t.join(10)


def test_read_up_to_reads_batches_of_records_and_a_short_last_one(tmp_path):
    files = []
    for f in range(2):
        path = str(tmp_path / f"r{f}.tfrecord")
        with tf.python_io.TFRecordWriter(path) as w:
            for i in range(3):
                w.write(b"%d-%d" % (f, i))
        files.append(path)
    q = tf.FIFOQueue(2, tf.string, shapes=[])
    keys, values = tf.TFRecordReader().read_up_to(q, 4)
    assert keys.shape.as_list() == [None] and values.shape.as_list() == [None]
    with tf.Session() as sess:
        sess.run(q.enqueue_many([files]))
        sess.run(q.close())
        k, v = sess.run([keys, values])
        # Across the end of the first file into the second.
        assert v.tolist() == [b"0-0", b"0-1", b"0-2", b"1-0"]
        assert k[0].decode().startswith(files[0] + ":") and k[3].decode().startswith(files[1] + ":")
        assert sess.run(values).tolist() == [b"1-1", b"1-2"]  # the end of the input: fewer
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(values)
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_records must be a positive"):
            sess.run(tf.TFRecordReader().read_up_to(q, 0)[1])


def test_shuffle_batch_shapes_and_contents():
    x = tf.train.range_input_producer(50, shuffle=False).dequeue()
    images, labels = tf.train.shuffle_batch([tf.fill([2, 3], tf.cast(x, tf.float32)), x], batch_size=8,
                                            capacity=40, min_after_dequeue=10, num_threads=2, seed=1)
    assert images.shape.as_list() == [8, 2, 3] and labels.shape.as_list() == [8]
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        imgs, labs = sess.run([images, labels])
        coord.request_stop()
        coord.join(threads)
    np.testing.assert_allclose(imgs, np.broadcast_to(labs.reshape(8, 1, 1), (8, 2, 3)))
    assert len(set(labs.tolist())) == 8  # distinct elements


def test_padding_fifo_queue_pads_to_the_longest():
    q = tf.PaddingFIFOQueue(5, [tf.int32], shapes=[[None]])
    x = tf.placeholder(tf.int32, [None])
    enqueue, dequeue = q.enqueue([x]), q.dequeue_many(2)
    with tf.Session() as sess:
        sess.run(enqueue, {x: [1, 2, 3]})
        sess.run(enqueue, {x: [4]})
        np.testing.assert_array_equal(sess.run(dequeue), [[1, 2, 3], [4, 0, 0]])


def test_image_ops_against_numpy():
    rng = np.random.RandomState(0)
    img = rng.rand(6, 5, 3).astype(np.float32) * 255
    x = tf.constant(img)
    std = tf.image.per_image_standardization(x)
    pad = tf.image.resize_image_with_crop_or_pad(x, 8, 3)
    crop = tf.random_crop(x, [4, 4, 3], seed=1)
    flip = tf.image.random_flip_left_right(x, seed=2)
    bright = tf.image.random_brightness(x, max_delta=10, seed=3)
    contrast = tf.image.random_contrast(x, lower=0.5, upper=1.5, seed=4)
    with tf.Session() as sess:
        s, p, c, f, b, k = sess.run([std, pad, crop, flip, bright, contrast])
    want = (img - img.mean()) / max(img.std(), 1 / np.sqrt(img.size))
    np.testing.assert_allclose(s, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(p[1:7, :, :], img[:, 1:4, :])
    assert (p[0] == 0).all() and (p[7] == 0).all()
    assert any(np.array_equal(c, img[i:i + 4, j:j + 4]) for i in range(3) for j in range(2))
    assert np.array_equal(f, img) or np.array_equal(f, img[:, ::-1])
    delta = b - img
    assert abs(delta.max() - delta.min()) < 1e-3 and abs(delta.mean()) <= 10
    mean = img.mean(axis=(0, 1))
    factor = (k - mean)[0, 0] / (img - mean)[0, 0]
    np.testing.assert_allclose((k - mean), (img - mean) * factor.mean(), rtol=1e-3, atol=1e-3)
    assert 0.5 <= factor.mean() <= 1.5


def test_queue_on_ps_shared_by_two_workers():
    jobs = distflow._distflow.local_cluster_spec(1, 2)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [tf.train.Server(cluster, job_name=j, task_index=i)
               for j in ("ps", "worker") for i in range(cluster.num_tasks(j))]
    try:
        with tf.device("/job:ps/task:0"):
            q = tf.FIFOQueue(10, tf.float32, shapes=[2], shared_name="shared_q")
        with tf.device("/job:worker/task:0"):
            produced = tf.placeholder(tf.float32, [2])
            enqueue = q.enqueue(produced)
        with tf.device("/job:worker/task:1"):
            consumed = q.dequeue() * 2.0
        assert q.queue_ref.device == "/job:ps/task:0"
        producer = tf.Session(servers[1].target)
        consumer = tf.Session(servers[2].target)
        result = []
        t = threading.Thread(target=lambda: result.extend(consumer.run(consumed) for _ in range(3)))
        t.start()
        for i in range(3):
            producer.run(enqueue, {produced: [i, -i]})
        t.join(60)
        assert not t.is_alive()
        np.testing.assert_allclose(result, [[0, 0], [2, -2], [4, -4]])
        producer.close()
        consumer.close()
    finally:
        for s in servers:
            s.stop()


def test_global_step_made_with_tf_variable_is_the_global_step():
    # The corpus's distributed reader (P08): mnist.training makes
    # tf.Variable(0, name="global_step"); a Supervisor must not add another.
    gs = tf.Variable(0, name="global_step", trainable=False)
    assert tf.train.get_global_step() is gs
    assert tf.train.get_or_create_global_step() is gs


def test_a_step_timeout_cancels_a_blocked_dequeue_and_the_queue_keeps_working():
    q = tf.FIFOQueue(3, tf.int32, shapes=[], name="waiting")
    dequeue, enqueue = q.dequeue(), q.enqueue(5)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(dequeue, options=tf.RunOptions(timeout_in_ms=200))
        sess.run(enqueue)
        assert sess.run(dequeue) == 5
        assert sess.run(q.size()) == 0


def test_queue_runner_threads_stop_with_the_coordinator_while_blocked_on_a_full_queue():
    q = tf.FIFOQueue(2, tf.float32, shapes=[])
    qr = tf.train.QueueRunner(q, [q.enqueue(1.0)] * 2)
    tf.train.add_queue_runner(qr)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert sess.run(q.dequeue()) == 1.0  # the runners keep it full
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=30)  # the close-on-stop thread unblocks them
        assert not any(t.is_alive() for t in threads)
        assert qr.exceptions_raised == []
        assert sess.run(q.is_closed())


def test_tfrecord_reader_reports_a_corrupt_file_and_goes_on_with_the_next(tmp_path):
    bad, good = str(tmp_path / "bad.tfrecord"), str(tmp_path / "good.tfrecord")
    _write(bad, [b"one", b"two"])
    data = bytearray(open(bad, "rb").read())
    data[-1] ^= 0x01  # the crc of "two"
    open(bad, "wb").write(bytes(data))
    _write(good, [b"three"])
    files = tf.FIFOQueue(3, tf.string, shapes=[])
    _, value = tf.TFRecordReader().read(files)
    with tf.Session() as sess:
        sess.run(files.enqueue_many([[bad, good]]))
        assert sess.run(value) == b"one"
        with pytest.raises(tf.errors.DataLossError, match=r"bad\.tfrecord' at byte offset 19"):
            sess.run(value)
        assert sess.run(value) == b"three"
