"""Summaries as a TensorFlow 1.x program writes them: a small Fashion-MNIST
model trained for a few steps writes scalar, histogram, image, text and
merged summaries and its graph through tf.summary.FileWriter (and through
SummarySaverHook/StepCounterHook in a MonitoredTrainingSession); the event
files are then read back with a reader written here from the format
(TFRecord framing, both masked CRC-32Cs checked, Events parsed with
protobuf) and every value is checked against what sess.run returned."""
import glob
import gzip
import os
import struct
import zlib

import numpy as np
import pytest

import distflow.compat.v1 as tf
from distflow.proto import event_pb2

FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.summary.FileWriterCache.clear()


# ---- a reader written from the format ---------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path):
    data = open(path, "rb").read()
    events, at = [], 0
    while at < len(data):
        assert len(data) - at >= 12, "truncated record header"
        length, = struct.unpack_from("<Q", data, at)
        crc_len, = struct.unpack_from("<I", data, at + 8)
        assert crc_len == masked(data[at:at + 8]), "length CRC"
        body = data[at + 12:at + 12 + length]
        assert len(body) == length, "truncated record"
        crc_body, = struct.unpack_from("<I", data, at + 12 + length)
        assert crc_body == masked(body), "data CRC"
        event = event_pb2.Event()
        event.ParseFromString(body)
        events.append(event)
        at += 16 + length
    return events


def only_event_file(logdir):
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    assert os.path.basename(files[0]).split(".")[3].isdigit()
    return files[0]


def decode_png(png):
    """(width, height, color type, pixels) of a PNG with one filter-0 IDAT
    stream, every chunk's CRC checked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", None
    while at < len(png):
        length, = struct.unpack_from(">I", png, at)
        kind = png[at + 4:at + 8]
        body = png[at + 8:at + 8 + length]
        crc, = struct.unpack_from(">I", png, at + 8 + length)
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color = header[:4]
    assert depth == 8
    raw = zlib.decompress(idat)
    row = len(raw) // height
    rows = [raw[y * row:(y + 1) * row] for y in range(height)]
    assert all(r[0] == 0 for r in rows)
    return width, height, color, b"".join(r[1:] for r in rows)


def default_limits():
    pos, v = [], 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(np.finfo(np.float64).max)
    return [-x for x in reversed(pos)] + [0.0] + pos


def expected_buckets(values):
    """TensorFlow's histogram of values: counts per default bucket (a value
    in the first bucket whose limit exceeds it), runs of empty buckets
    collapsed into one."""
    limits = np.array(default_limits())
    counts = np.bincount(np.searchsorted(limits, values, side="right"), minlength=len(limits))
    out, i = [], 0
    while i < len(limits):
        limit, count = limits[i], counts[i]
        i += 1
        if count == 0:
            while i < len(limits) and counts[i] == 0:
                limit = limits[i]
                i += 1
        out.append((float(limit), float(count)))
    return out


def fashion_images(n):
    with gzip.open(FASHION, "rb") as f:
        magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051 and rows == 28 and cols == 28
        return np.frombuffer(f.read(n * 784), dtype=np.uint8).reshape(n, 28, 28, 1)


# ---- the program ------------------------------------------------------------

def build_model():
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    labels = tf.placeholder(tf.float32, [None, 10], name="labels")
    images = tf.placeholder(tf.uint8, [None, 28, 28, 1], name="images")
    with tf.name_scope("model"):
        w = tf.Variable(tf.truncated_normal([784, 10], stddev=0.1), name="weights")
        b = tf.Variable(tf.zeros([10]), name="biases")
        logits = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=global_step)
    with tf.name_scope("train"):
        loss_summary = tf.summary.scalar("loss", loss)
    hist = tf.summary.histogram("weights", w)
    img = tf.summary.image("input", images, max_outputs=2)
    fimg = tf.summary.image("input_float", tf.reshape(x, [-1, 28, 28, 1]) * 2.0 - 1.0, max_outputs=1)
    txt = tf.summary.text("notes", tf.constant(["first run", "of the summaries test"]))
    return dict(x=x, labels=labels, images=images, w=w, loss=loss, train_op=train_op, global_step=global_step,
                summaries=[loss_summary, hist, img, fimg, txt])


def batch(step, n=16):
    imgs = fashion_images(64)
    rng = np.random.RandomState(step)
    pick = rng.choice(64, n, replace=False)
    onehot = np.eye(10, dtype=np.float32)[rng.randint(0, 10, n)]
    return imgs[pick], imgs[pick].reshape(n, 784).astype(np.float32) / 255.0, onehot


def test_training_program_writes_every_summary_readable(tmp_path):
    m = build_model()
    merged = tf.summary.merge_all()
    assert merged is not None
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == m["summaries"]
    assert tf.GraphKeys.SUMMARIES == "summaries"
    assert m["summaries"][0].op.name == "train/loss"
    logdir = str(tmp_path / "logs" / "run1")   # created by the writer
    expected = []
    with tf.Session() as sess, tf.summary.FileWriter(logdir, sess.graph) as writer:
        assert writer.get_logdir() == logdir
        sess.run(tf.global_variables_initializer())
        for step in range(3):
            imgs, x, y = batch(step)
            feed = {m["x"]: x, m["labels"]: y, m["images"]: imgs}
            sess.run(m["train_op"], feed_dict=feed)
            summary, loss, w, gs = sess.run([merged, m["loss"], m["w"], m["global_step"]], feed_dict=feed)
            writer.add_summary(summary, int(gs))
            expected.append(dict(step=int(gs), loss=float(loss), w=w.copy(), imgs=imgs, x=x))
        writer.add_run_metadata(b"step-trace", "step_3", 3)
        # A Summary proto object is accepted too.
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="manual", simple_value=1.5)]), 4)
    events = read_events(only_event_file(logdir))

    assert events[0].file_version == "brain.Event:2"
    assert events[0].wall_time > 1.6e9
    assert events[1].WhichOneof("what") == "graph_def"
    assert b"model/weights" in events[1].graph_def and b"train/loss" in events[1].graph_def
    summaries = [e for e in events if e.WhichOneof("what") == "summary"]
    assert [e.step for e in summaries] == [1, 2, 3, 4]
    for event, exp in zip(summaries, expected):
        values = {v.tag: v for v in event.summary.value}
        assert sorted(values) == ["input/image/0", "input/image/1", "input_float/image", "notes", "train/loss",
                                  "weights"]
        assert values["train/loss"].simple_value == np.float32(exp["loss"])
        h = values["weights"].histo
        w = exp["w"].astype(np.float64).ravel()
        assert h.num == w.size
        assert h.min == w.min() and h.max == w.max()
        assert h.sum == pytest.approx(w.sum(), rel=1e-9, abs=1e-9)
        assert h.sum_squares == pytest.approx((w * w).sum(), rel=1e-9)
        assert list(zip(h.bucket_limit, h.bucket)) == expected_buckets(w)
        for i in range(2):
            image = values[f"input/image/{i}"].image
            assert (image.width, image.height, image.colorspace) == (28, 28, 1)
            width, height, color, pixels = decode_png(image.encoded_image_string)
            assert (width, height, color) == (28, 28, 0)
            assert pixels == exp["imgs"][i].tobytes()
        fimage = values["input_float/image"].image
        width, height, color, pixels = decode_png(fimage.encoded_image_string)
        assert (width, height) == (28, 28)
        f = (exp["x"][0] * np.float32(2.0) - np.float32(1.0)).astype(np.float32)
        scale = np.float32(127.0) / max(abs(f.min()), abs(f.max())) if f.min() < 0 else np.float32(255.0) / f.max()
        want = (f.astype(np.float64) * float(scale) + (128.0 if f.min() < 0 else 0.0)).astype(np.uint8)
        got = np.frombuffer(pixels, dtype=np.uint8)
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # float rounding at a boundary
        text = values["notes"]
        assert text.metadata.plugin_data.plugin_name == "text"
        assert list(text.tensor.string_val) == [b"first run", b"of the summaries test"]
        assert [d.size for d in text.tensor.tensor_shape.dim] == [2]
    run_metadata = [e for e in events if e.WhichOneof("what") == "tagged_run_metadata"]
    assert len(run_metadata) == 1 and run_metadata[0].step == 3
    assert run_metadata[0].tagged_run_metadata.tag == "step_3"
    assert run_metadata[0].tagged_run_metadata.run_metadata == b"step-trace"
    assert summaries[-1].summary.value[0].simple_value == 1.5


def test_merge_names_and_families(tmp_path):
    a = tf.summary.scalar("a", tf.constant(1.0))
    a2 = tf.summary.scalar("a", tf.constant(2.0))
    with tf.name_scope("outer"):
        fam = tf.summary.scalar("b", tf.constant(3), family="fam")
    bad_chars = tf.summary.scalar("has space:colon", tf.constant(4.0))
    with tf.Session() as sess:
        merged = sess.run(tf.summary.merge([a, a2, fam, bad_chars]))
    s = tf.Summary.FromString(merged)
    assert [(v.tag, v.simple_value) for v in s.value] == [
        ("a", 1.0), ("a_1", 2.0), ("fam/outer/fam/b", 3.0), ("has_space_colon", 4.0)]
    assert tf.summary.merge_all(key="no such collection") is None
    only = tf.summary.scalar("kept", tf.constant(1.0), collections=["mine"])
    assert tf.get_collection("mine") == [only]
    assert only not in tf.get_collection(tf.GraphKeys.SUMMARIES)


def test_hooks_write_summaries_and_steps_per_second(tmp_path):
    m = build_model()
    logdir = str(tmp_path / "hooked")
    merged = tf.summary.merge([m["summaries"][0]])
    hooks = [tf.train.SummarySaverHook(save_steps=2, output_dir=logdir, summary_op=merged),
             tf.train.StepCounterHook(every_n_steps=2, output_dir=logdir),
             tf.train.StopAtStepHook(last_step=6)]
    with tf.train.MonitoredTrainingSession(hooks=hooks, save_checkpoint_secs=None) as sess:
        step = 0
        while not sess.should_stop():
            imgs, x, y = batch(step)
            sess.run(m["train_op"], feed_dict={m["x"]: x, m["labels"]: y, m["images"]: imgs})
            step += 1
    tf.summary.FileWriterCache.clear()   # flushes and closes the shared writer
    events = read_events(only_event_file(logdir))
    assert events[0].file_version == "brain.Event:2"
    assert events[1].WhichOneof("what") == "graph_def"
    starts = [e for e in events if e.WhichOneof("what") == "session_log"]
    assert len(starts) == 1 and starts[0].session_log.status == event_pb2.SessionLog.START
    losses = [(e.step, e.summary.value[0].simple_value) for e in events
              if e.WhichOneof("what") == "summary" and e.summary.value[0].tag == "train/loss"]
    assert [s for s, _ in losses] == [1, 3, 5]
    assert all(np.isfinite(v) and v > 0 for _, v in losses)
    rates = [(e.step, e.summary.value[0].simple_value) for e in events
             if e.WhichOneof("what") == "summary" and e.summary.value[0].tag == "global_step/sec"]
    assert [s for s, _ in rates] == [3, 5]
    assert all(v > 0 for _, v in rates)


def test_non_scalar_to_scalar_names_the_summary():
    with pytest.raises(ValueError, match="tf.summary.scalar 'my_loss'.*shape \\[3\\]"):
        tf.summary.scalar("my_loss", tf.constant([1.0, 2.0, 3.0]))
    # Unknown at build time: the step fails naming the summary op.
    p = tf.placeholder(tf.float32, name="p")
    s = tf.summary.scalar("late_loss", p)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="late_loss.*same shape"):
            sess.run(s, feed_dict={p: [1.0, 2.0]})
        assert tf.Summary.FromString(sess.run(s, feed_dict={p: 2.5})).value[0].simple_value == 2.5


def test_bad_inputs_are_python_exceptions(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a directory")
    with pytest.raises(tf.errors.InvalidArgumentError, match=str(path)):
        tf.summary.FileWriter(str(path))
    with pytest.raises(tf.errors.OpError, match=str(path / "sub")):
        tf.summary.FileWriter(str(path / "sub"))
    with pytest.raises(ValueError, match="tf.summary.image 'pic'"):
        tf.summary.image("pic", tf.zeros([2, 4, 4, 2]))
    with pytest.raises(ValueError, match="tf.summary.text 'words'"):
        tf.summary.text("words", tf.constant(1.0))
    nan = tf.placeholder(tf.float32, [None], name="nan")
    h = tf.summary.histogram("h", nan)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="Nan or Inf in summary histogram for: h"):
            sess.run(h, feed_dict={nan: [1.0, float("nan")]})
    writer = tf.summary.FileWriter(str(tmp_path / "w"))
    with pytest.raises(TypeError, match="add_summary"):
        writer.add_summary(42, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a serialized Summary"):
        writer.add_summary(b"\xff\xff", 1)
    writer.close()
    writer.add_summary(tf.Summary(), 1)  # dropped after close, as TensorFlow does


def test_missing_summary_names_say_so():
    with pytest.raises(NotImplementedError, match="tf.summary.audio"):
        tf.summary.audio("a", tf.zeros([1, 10]), 16000)
