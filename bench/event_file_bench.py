#!/usr/bin/python3
"""What TensorBoard summaries cost a TF1 program: the book's CNN (conv 5x5x32,
pool, conv 5x5x64, pool, dense 500, dense 10; Adam 1e-4; batch 50) trained
in process under tf.train.MonitoredTrainingSession, with the summaries a TF1
program writes by default (every 100 steps: the loss and accuracy scalars,
a histogram of every weight, and global_step/sec; the graph once) against
the same program with summaries off (no summary ops, save_summaries_steps
and log_step_count_steps None).

    bench/event_file_bench.py [BUILD_DIR] [--steps N] [--rounds R]

The machine is shared, so the two are interleaved: each of R rounds runs
N / R steps with summaries and N / R without (which goes first alternates),
each in a fresh graph and session. A run's time per step is its mean over
the steps after 20 warm-up steps (the mean, not the median: one step in 100
writes the summaries, and that cost is what is measured); the overhead is
the ratio of the two medians of those over the rounds, and each round's
ratio is printed too. Reports the events files' bytes over all N summary steps, the
bytes per written summary, and that every file reads back (framing and
CRCs checked by distflow's TFRecord reader). docs/PERFORMANCE.md records a
run."""
import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("build", nargs="?", default="build")
parser.add_argument("--steps", type=int, default=5000, help="summary steps in all (and as many without)")
parser.add_argument("--rounds", type=int, default=5)
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))

import numpy as np  # noqa: E402

import distflow.compat.v1 as tf  # noqa: E402
from distflow.proto import event_pb2  # noqa: E402

WARMUP = 20


def model(summaries):
    x = tf.placeholder(tf.float32, [None, 784], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    net = tf.reshape(x, [-1, 28, 28, 1])
    net = tf.layers.conv2d(net, 32, 5, padding="same", activation=tf.nn.relu, name="conv1")
    net = tf.layers.max_pooling2d(net, 2, 2)
    net = tf.layers.conv2d(net, 64, 5, padding="same", activation=tf.nn.relu, name="conv2")
    net = tf.layers.max_pooling2d(net, 2, 2)
    net = tf.layers.dense(tf.layers.flatten(net), 500, activation=tf.nn.relu, name="fc")
    logits = tf.layers.dense(net, 10, name="logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(1e-4).minimize(loss, global_step=step)
    if summaries:
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("accuracy", accuracy)
        for v in tf.trainable_variables():
            tf.summary.histogram(v.op.name, v)
    return x, y, train


def run(summaries, steps, logdir, batch):
    """Mean ms per step after the warm-up."""
    tf.reset_default_graph()
    tf.set_random_seed(1)
    x, y, train = model(summaries)
    times = []
    kw = {} if summaries else {"save_summaries_steps": None, "save_summaries_secs": None,
                               "log_step_count_steps": None}
    with tf.train.MonitoredTrainingSession(checkpoint_dir=logdir, save_checkpoint_secs=None, **kw) as sess:
        for i in range(steps + WARMUP):
            t0 = time.perf_counter()
            sess.run(train, {x: batch[0], y: batch[1]})
            if i >= WARMUP:
                times.append(time.perf_counter() - t0)
    return statistics.fmean(times) * 1e3


KINDS = {}  # event kind -> [events, bytes on disk (record + 16 bytes of framing)]


def read_back(logdir):
    """(bytes, events, summary values) of logdir's events files, read with
    distflow's TFRecord reader (which checks the framing and the CRCs);
    adds each event's bytes to KINDS by kind."""
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    size = sum(os.path.getsize(f) for f in files)
    events = values = 0
    for f in files:
        for record in tf.python_io.tf_record_iterator(f):
            e = event_pb2.Event()
            e.ParseFromString(record)
            events += 1
            values += len(e.summary.value)
            kind = e.WhichOneof("what") or "none"
            if kind == "summary":
                kind = "summary: global_step/sec" if [v.tag for v in e.summary.value] == ["global_step/sec"] \
                    else f"summary: {len(e.summary.value)} values"
            entry = KINDS.setdefault(kind, [0, 0])
            entry[0] += 1
            entry[1] += len(record) + 16
    return size, events, values


def main():
    rng = np.random.RandomState(0)
    batch = (rng.rand(50, 784).astype(np.float32), rng.randint(0, 10, 50).astype(np.int64))
    per_round = max(1, args.steps // args.rounds)
    on, off = [], []
    root = tempfile.mkdtemp(prefix="event_file_bench_")
    total_bytes = total_events = total_values = 0
    try:
        for r in range(args.rounds):
            order = [True, False] if r % 2 == 0 else [False, True]
            for summaries in order:
                logdir = os.path.join(root, f"round{r}_{'on' if summaries else 'off'}")
                ms = run(summaries, per_round, logdir, batch)
                (on if summaries else off).append(ms)
                if summaries:
                    size, events, values = read_back(logdir)
                    total_bytes, total_events, total_values = (total_bytes + size, total_events + events,
                                                               total_values + values)
                print(f"round {r + 1}/{args.rounds}: summaries {'on ' if summaries else 'off'} "
                      f"{ms:.2f} ms/step", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    m_on, m_off = statistics.median(on), statistics.median(off)
    ratios = [a / b for a, b in zip(on, off)]
    print(f"\n{args.steps} steps with summaries in {args.rounds} rounds (every 100 steps: 2 scalars, "
          f"{len(tf.trainable_variables())} histograms, global_step/sec; the graph once per run)")
    print(f"events files: {total_bytes} bytes, {total_events} events, {total_values} summary values; "
          f"{total_bytes / max(total_events, 1):.0f} bytes per event")
    for kind, (n, b) in sorted(KINDS.items()):
        print(f"  {kind}: {n} events, {b} bytes ({b / n:.0f} each)")
    print(f"mean step (median over rounds): {m_on:.2f} ms with summaries, {m_off:.2f} ms without; "
          f"ratio {m_on / m_off:.3f} "
          f"(per-round ratios {', '.join(f'{q:.3f}' for q in ratios)})")


if __name__ == "__main__":
    main()
