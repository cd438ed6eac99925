"""tf.data through distflow.compat.v1: datasets built by the C++ runtime,
each pipeline's elements checked against NumPy, iterators' end
(OutOfRangeError) and bad input (errors naming the op)."""
import os

import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def drain(next_element, sess=None, limit=10000):
    own = sess is None
    sess = sess or tf.Session()
    out = []
    try:
        for _ in range(limit):
            out.append(sess.run(next_element))
    except tf.errors.OutOfRangeError:
        pass
    else:
        raise AssertionError("the iterator did not end")
    finally:
        if own:
            sess.close()
    return out


X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10, dtype=np.int64) * 7


def test_slices_batch_repeat_match_numpy():
    ds = tf.data.Dataset.from_tensor_slices((X, {"y": Y})).batch(4).repeat(2)
    x, d = ds.make_one_shot_iterator().get_next()
    assert x.shape.as_list() == [None, 3] and d["y"].shape.as_list() == [None]
    got = drain((x, d["y"]))
    want = [(X[i:i + 4], Y[i:i + 4]) for i in (0, 4, 8)] * 2
    assert len(got) == len(want)
    for (gx, gy), (wx, wy) in zip(got, want):
        np.testing.assert_array_equal(gx, wx)
        np.testing.assert_array_equal(gy, wy)


def test_drop_remainder_gives_static_batch_dimension():
    ds = tf.data.Dataset.from_tensor_slices(X).batch(4, drop_remainder=True)
    x = ds.make_one_shot_iterator().get_next()
    assert x.shape.as_list() == [4, 3]
    got = drain(x)
    assert [g.tolist() for g in got] == [X[0:4].tolist(), X[4:8].tolist()]


def test_from_tensors_range_take_skip_shard():
    assert [v.tolist() for v in drain(tf.data.Dataset.from_tensors(X).make_one_shot_iterator().get_next())] == \
        [X.tolist()]
    r = tf.data.Dataset.range(3, 20, 2)
    assert drain(r.make_one_shot_iterator().get_next()) == list(range(3, 20, 2))
    assert drain(r.skip(2).take(3).make_one_shot_iterator().get_next()) == list(range(3, 20, 2))[2:5]
    assert drain(tf.data.Dataset.range(10).shard(3, 1).make_one_shot_iterator().get_next()) == [1, 4, 7]
    assert drain(tf.data.Dataset.range(5, 0, -2).make_one_shot_iterator().get_next()) == [5, 3, 1]


def test_zip_concatenate_cache_prefetch():
    a, b = tf.data.Dataset.range(4), tf.data.Dataset.from_tensor_slices(Y[:3])
    assert drain(tf.data.Dataset.zip((a, b)).make_one_shot_iterator().get_next()) == \
        [(i, Y[i]) for i in range(3)]
    cat = a.concatenate(tf.data.Dataset.range(10, 12))
    assert drain(cat.make_one_shot_iterator().get_next()) == [0, 1, 2, 3, 10, 11]
    cached = tf.data.Dataset.range(6).shuffle(6).cache().repeat(3).prefetch(2)
    got = drain(cached.make_one_shot_iterator().get_next())
    assert sorted(got[:6]) == list(range(6))
    assert got[:6] == got[6:12] == got[12:]  # the cache replays the first pass


def test_cache_to_a_file_is_written_by_a_whole_pass_and_read_by_later_ones(tmp_path):
    path = str(tmp_path / "train.cache")
    first = tf.data.Dataset.from_tensor_slices((X, Y)).shuffle(10).cache(path)
    # A pass cut short writes nothing, and leaves no temporary file.
    assert len(drain(first.take(3).make_one_shot_iterator().get_next())) == 3
    assert os.listdir(tmp_path) == []
    got = drain(first.make_one_shot_iterator().get_next())
    assert sorted(int(y) for _, y in got) == sorted(Y.tolist())
    assert os.listdir(tmp_path) == ["train.cache"]
    # Another dataset (another program) of the same components given the same
    # file reads the cached elements, in the order they were written, and
    # never its own input.
    other = tf.data.Dataset.from_tensor_slices((X * 0, Y * 0)).cache(path).repeat(2)
    again = drain(other.make_one_shot_iterator().get_next())
    assert len(again) == 20
    for (x1, y1), (x2, y2) in zip(got + got, again):
        assert y1 == y2 and np.array_equal(x1, x2)
    # A file of other components is named, with the fix.
    wrong = tf.data.Dataset.range(3).cache(path)
    with pytest.raises(tf.errors.InvalidArgumentError, match="train.cache is not this dataset's cache.*delete it"):
        drain(wrong.make_one_shot_iterator().get_next())
    # A damaged file is named too, not a crash.
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) - 7])
    cut = tf.data.Dataset.from_tensor_slices((X, Y)).cache(path)
    with pytest.raises(tf.errors.DataLossError, match="train.cache"):
        drain(cut.make_one_shot_iterator().get_next())
    bad_dir = tf.data.Dataset.range(3).cache(str(tmp_path / "no" / "such" / "dir" / "c"))
    with pytest.raises(tf.errors.OpError, match="cannot write the cache file beside"):
        drain(bad_dir.make_one_shot_iterator().get_next())


def test_shuffle_is_a_permutation_seeded_and_reshuffled_each_epoch():
    ds = tf.data.Dataset.range(50).shuffle(50, seed=3).repeat(2)
    got = drain(ds.make_one_shot_iterator().get_next())
    first, second = got[:50], got[50:]
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != list(range(50)) and first != second
    tf.reset_default_graph()
    again = drain(tf.data.Dataset.range(50).shuffle(50, seed=3).repeat(2).make_one_shot_iterator().get_next())
    assert again == got  # the same seed, the same orders
    tf.reset_default_graph()
    fixed = tf.data.Dataset.range(20).shuffle(20, seed=5, reshuffle_each_iteration=False).repeat(2)
    got = drain(fixed.make_one_shot_iterator().get_next())
    assert got[:20] == got[20:]
    # A small buffer only moves elements a little ahead.
    small = drain(tf.data.Dataset.range(100).shuffle(2, seed=1).make_one_shot_iterator().get_next())
    assert sorted(small) == list(range(100)) and all(v <= i + 1 for i, v in enumerate(small))


def test_padded_batch_pads_to_the_longest_or_given_shape():
    rows = [[1], [1, 2, 3], [4, 5]]
    ds = tf.data.Dataset.from_tensors(tf.constant(rows[0]))
    for r in rows[1:]:
        ds = ds.concatenate(tf.data.Dataset.from_tensors(tf.constant(r)))
    longest = ds.padded_batch(2, padded_shapes=[None])
    got = drain(longest.make_one_shot_iterator().get_next())
    assert [g.tolist() for g in got] == [[[1, 0, 0], [1, 2, 3]], [[4, 5]]]
    tf.reset_default_graph()
    ds = tf.data.Dataset.from_tensors(tf.constant(rows[0])).concatenate(tf.data.Dataset.from_tensors(tf.constant(rows[1])))
    fixed = ds.padded_batch(2, padded_shapes=[5], padding_values=-1)
    x = fixed.make_one_shot_iterator().get_next()
    assert x.shape.as_list() == [None, 5]
    assert [g.tolist() for g in drain(x)] == [[[1, -1, -1, -1, -1], [1, 2, 3, -1, -1]]]
    tf.reset_default_graph()
    ds = tf.data.Dataset.from_tensors(tf.constant(rows[1])).padded_batch(1, padded_shapes=[2])
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="dimension 0 of 3, more than"):
        sess.run(ds.make_one_shot_iterator().get_next())


def test_initializable_iterator_fed_from_placeholders_and_reinitialized():
    px = tf.placeholder(tf.float32, [None, 3])
    ds = tf.data.Dataset.from_tensor_slices(px).batch(2)
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not initialized"):
            sess.run(nxt)
        sess.run(it.initializer, feed_dict={px: X[:3]})
        got = drain(nxt, sess)
        assert [g.tolist() for g in got] == [X[:2].tolist(), X[2:3].tolist()]
        sess.run(it.initializer, feed_dict={px: X[5:9] * 2})  # the feed's memory is copied, not kept
        got = drain(nxt, sess)
        np.testing.assert_array_equal(np.concatenate(got), X[5:9] * 2)


def test_reinitializable_iterator_from_structure():
    train = tf.data.Dataset.range(5)
    test = tf.data.Dataset.range(100, 102)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    init_train, init_test = it.make_initializer(train), it.make_initializer(test)
    with tf.Session() as sess:
        sess.run(init_train)
        assert drain(nxt, sess) == [0, 1, 2, 3, 4]
        sess.run(init_test)
        assert drain(nxt, sess) == [100, 101]
    with pytest.raises(TypeError, match="make_initializer"):
        it.make_initializer(tf.data.Dataset.from_tensor_slices(X))


def test_text_line_and_fixed_length_record_files(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"first\nsecond\r\nthird")
    b.write_bytes(b"fourth\n")
    lines = drain(tf.data.TextLineDataset([str(a), str(b)]).make_one_shot_iterator().get_next())
    assert lines == [b"first", b"second", b"third", b"fourth"]
    rec = tmp_path / "r.bin"
    rec.write_bytes(b"HH" + b"abcd" + b"efgh" + b"F")
    ds = tf.data.FixedLengthRecordDataset(str(rec), 4, header_bytes=2, footer_bytes=1)
    assert drain(ds.make_one_shot_iterator().get_next()) == [b"abcd", b"efgh"]
    rec.write_bytes(b"HH" + b"abcdef")  # not whole records
    tf.reset_default_graph()
    nxt = tf.data.FixedLengthRecordDataset(str(rec), 4, header_bytes=2).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.DataLossError, match="r.bin.* 8 bytes"):
        sess.run(nxt)
    tf.reset_default_graph()
    nxt = tf.data.TextLineDataset(str(tmp_path / "missing.txt")).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match="missing.txt"):
        sess.run(nxt)


def test_mismatched_component_sizes_are_named():
    with pytest.raises(ValueError, match="different numbers of rows"):
        tf.data.Dataset.from_tensor_slices((X, Y[:4]))
    px, py = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.int64, [None])
    it = tf.data.Dataset.from_tensor_slices((px, py)).make_initializable_iterator()
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError,
                                             match=r"TensorSliceDataset.*component 0 has 10.*component 1 has 4"):
        sess.run(it.initializer, feed_dict={px: X, py: Y[:4]})


def test_batching_elements_of_different_shapes_names_them():
    pv = tf.placeholder(tf.float32, [None])
    d1 = tf.data.Dataset.from_tensors(pv)
    ds = d1.concatenate(tf.data.Dataset.from_tensors(tf.constant([1.0, 2.0, 3.0]))).batch(2)
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        sess.run(it.initializer, feed_dict={pv: [1.0]})
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"IteratorGetNext.*element 1 .*\[3\]"):
            sess.run(nxt)


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _tfrecord(records):
    import struct
    out = b""
    for r in records:
        length = struct.pack("<Q", len(r))
        out += length + struct.pack("<I", _masked(length)) + r + struct.pack("<I", _masked(r))
    return out


def test_tfrecord_dataset_reads_records_and_names_a_corrupt_one(tmp_path):
    a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    a.write_bytes(_tfrecord([b"one", b"", b"three"]))
    b.write_bytes(_tfrecord([b"four" * 10]))
    ds = tf.data.TFRecordDataset([str(a), str(b)]).map(lambda r: (r, tf.size(tf.reshape(r, [1]))))
    got = drain(ds.make_one_shot_iterator().get_next())
    assert [g[0] for g in got] == [b"one", b"", b"three", b"four" * 10]
    data = bytearray(_tfrecord([b"good", b"damaged"]))
    data[-6] ^= 0xFF  # a byte of the second record's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    tf.reset_default_graph()
    nxt = tf.data.TFRecordDataset(str(bad)).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert sess.run(nxt) == b"good"
        with pytest.raises(tf.errors.DataLossError, match=r"bad\.tfrecord.*(offset|byte) 20"):
            sess.run(nxt)


def test_from_generator_runs_the_generator_once_to_its_end():
    def gen(n):
        for i in range(n):
            yield i, [float(i)] * 2

    ds = tf.data.Dataset.from_generator(gen, (tf.int64, tf.float32), ([], [2]), args=(4,))
    got = drain(ds.batch(3).make_one_shot_iterator().get_next())
    assert [g[0].tolist() for g in got] == [[0, 1, 2], [3]]
    np.testing.assert_allclose(got[1][1], [[3.0, 3.0]])
    with pytest.raises(ValueError, match="component 1 of element 1 has shape"):
        tf.data.Dataset.from_generator(lambda: iter([(1, [1.0]), (2, [1.0, 2.0])]), (tf.int64, tf.float32))
    with pytest.raises(ValueError, match="must be finite"):
        tf.data.Dataset.from_generator(lambda: iter(int, 1), tf.int64, max_elements=100)


def test_an_initializable_iterator_on_a_remote_task_across_steps():
    # The dataset and its iterator live on ps:1; the initializer, the
    # worker's step and a direct fetch are three signatures (three graphs
    # registered on ps:1) sharing the iterator.
    import distflow
    jobs = distflow._distflow.local_cluster_spec(2, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [tf.train.Server(cluster, job_name=j, task_index=i)
               for j in ("ps", "worker") for i in range(cluster.num_tasks(j))]
    with tf.device("/job:ps/task:1"):
        p = tf.placeholder(tf.float32, [None])
        it = tf.data.Dataset.from_tensor_slices(p).batch(2).make_initializable_iterator()
        nxt = it.get_next()
    with tf.device("/job:worker/task:0"):
        out = nxt * 10.0
    try:
        with tf.Session(servers[2].target) as sess:
            sess.run(it.initializer, {p: [1.0, 2.0, 3.0]})
            np.testing.assert_allclose(sess.run(out), [10.0, 20.0])
            np.testing.assert_allclose(sess.run(nxt), [3.0])
            with pytest.raises(tf.errors.OutOfRangeError, match=r"task:1.*IteratorGetNext"):
                sess.run(out)
    finally:
        for s in servers:
            s.stop()


def test_feedable_iterator_switches_datasets_by_string_handle():
    train = tf.data.Dataset.range(100).repeat()
    val = tf.data.Dataset.range(1000, 1003)
    handle = tf.placeholder(tf.string, [])
    it = tf.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
    nxt = it.get_next()
    train_it, val_it = train.make_one_shot_iterator(), val.make_initializable_iterator()
    with tf.Session() as sess:
        th, vh = sess.run([train_it.string_handle(), val_it.string_handle()])
        assert th != vh
        assert [sess.run(nxt, {handle: th}) for _ in range(3)] == [0, 1, 2]
        sess.run(val_it.initializer)
        assert [sess.run(nxt, {handle: vh}) for _ in range(3)] == [1000, 1001, 1002]
        assert sess.run(nxt, {handle: th}) == 3  # the training iterator went on where it was
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt, {handle: vh})
