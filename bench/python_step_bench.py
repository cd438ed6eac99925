#!/usr/bin/python3
"""The book's CNN training step driven from Python (sess.run with numpy
feeds, distflow.compat.v1) against the same step driven from C++
(train_bench's BM_CnnStep), in one run: what the Python client adds.

    bench/python_step_bench.py [BUILD_DIR]      (default: build)

Both build the same graph (the C++ layers of train/layers.h, sparse softmax
cross-entropy, Adam 1e-4, batch 50) in process with 2 intra-op threads. The
two are measured in turn, five times each, so that a slow spell of the
machine hits both: the C++ time is Google Benchmark's real time per step
(2 s of steps), the Python time that of 60 steps after 3 warm-up steps.
Prints the medians and their ratio; docs/PERFORMANCE.md records a run.
"""
import json
import os
import statistics
import subprocess
import sys
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
sys.path.insert(0, os.path.join(BUILD, "python"))

import numpy as np  # noqa: E402

import distflow.compat.v1 as tf  # noqa: E402
from distflow import raw_ops  # noqa: E402
from distflow.contrib import slim  # noqa: E402


def cpp_ms():
    out = subprocess.run([os.path.join(BUILD, "bench", "train_bench"), "--benchmark_filter=BM_CnnStep/threads:2",
                          "--benchmark_format=json", "--benchmark_min_time=2"],
                         capture_output=True, text=True, check=True)
    runs = json.loads(out.stdout)["benchmarks"]
    return runs[0]["real_time"]  # milliseconds (the benchmark's unit)


def python_step():
    """Builds the model; returns a function that times `n` steps (ms per step)."""
    x = tf.placeholder(tf.float32, shape=[None, 784], name="x")
    y = tf.placeholder(tf.int32, shape=[None], name="y")
    net = tf.reshape(x, [-1, 28, 28, 1])
    net = slim.layers.conv2d(net, 32, [5, 5], scope="conv1")
    net = slim.layers.max_pool2d(net, [2, 2], scope="pool1")
    net = slim.layers.conv2d(net, 64, [5, 5], scope="conv2")
    net = slim.layers.max_pool2d(net, [2, 2], scope="pool2")
    net = slim.layers.flatten(net, scope="flatten")
    net = slim.layers.fully_connected(net, 500, scope="fully_connected")
    logits = slim.layers.fully_connected(net, 10, activation_fn=None, scope="pred")
    xent, _ = raw_ops.SparseSoftmaxCrossEntropyWithLogits(logits, y)
    loss = tf.reduce_mean(xent)
    train = tf.train.AdamOptimizer(1e-4).minimize(loss)
    rng = np.random.RandomState(1)
    bx = rng.rand(50, 784).astype(np.float32)
    by = rng.randint(0, 10, 50).astype(np.int32)
    config = tf.ConfigProto(intra_op_parallelism_threads=2)
    sess = tf.Session(config=config)
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
        sess.run(train, feed_dict={x: bx, y: by})

    def timed(n=60):
        start = time.perf_counter()
        for _ in range(n):
            sess.run(train, feed_dict={x: bx, y: by})
        return (time.perf_counter() - start) / n * 1e3

    def timed_raw(n=60):  # the binding alone: feeds converted once, no Python layer
        feeds = [(x._out, bx), (y._out, by)]
        start = time.perf_counter()
        for _ in range(n):
            sess._sess.run(feeds, [], [train._op], 0)
        return (time.perf_counter() - start) / n * 1e3
    timed.raw = timed_raw
    return timed


def main():
    timed = python_step()
    cpp, py = [], []
    for _ in range(5):
        cpp.append(cpp_ms())
        py.append(timed())
    c, p = statistics.median(cpp), statistics.median(py)
    print("C++ ms/step:    " + " ".join(f"{v:.2f}" for v in cpp))
    print("Python ms/step: " + " ".join(f"{v:.2f}" for v in py))
    print(f"book CNN step, batch 50, 2 intra-op threads: C++ {c:.2f} ms, Python {p:.2f} ms (medians), "
          f"Python/C++ = {p / c:.3f} ({(p / c - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
