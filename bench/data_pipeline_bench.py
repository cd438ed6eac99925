#!/usr/bin/python3
"""The book's CNN training step fed two ways, in one run: feed_dict with
batches made in Python (input_data's next_batch, as the book's program
does) against a tf.data pipeline (from_tensor_slices, shuffle, repeat,
batch, prefetch) whose batches are made by the runtime, with no Python per
batch. Fashion-MNIST (Debian's dataset-fashion-mnist), batch 50, Adam 1e-4,
2 intra-op threads.

    bench/data_pipeline_bench.py [BUILD_DIR] [--rounds N] [--steps N]

The two are measured in turn, `rounds` times each (after warm-up steps), so
that a slow spell of the machine hits both; prints each round's
examples/s, the medians and their ratio. docs/PERFORMANCE.md records a run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("build", nargs="?", default="build")
parser.add_argument("--rounds", type=int, default=5)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch", type=int, default=50)
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))

import numpy as np  # noqa: E402

import distflow.compat.v1 as tf  # noqa: E402
from distflow import raw_ops  # noqa: E402
from distflow.contrib import slim  # noqa: E402
from distflow.examples.tutorials.mnist import input_data  # noqa: E402


def model(x, y):
    net = tf.reshape(x, [-1, 28, 28, 1])
    net = slim.layers.conv2d(net, 32, [5, 5], scope="conv1")
    net = slim.layers.max_pool2d(net, [2, 2], scope="pool1")
    net = slim.layers.conv2d(net, 64, [5, 5], scope="conv2")
    net = slim.layers.max_pool2d(net, [2, 2], scope="pool2")
    net = slim.layers.flatten(net, scope="flatten")
    net = slim.layers.fully_connected(net, 500, scope="fully_connected")
    logits = slim.layers.fully_connected(net, 10, activation_fn=None, scope="pred")
    xent, _ = raw_ops.SparseSoftmaxCrossEntropyWithLogits(logits, y)
    return tf.train.AdamOptimizer(1e-4).minimize(tf.reduce_mean(xent))


def session(graph):
    return tf.Session(graph=graph, config=tf.ConfigProto(intra_op_parallelism_threads=2))


def feed_dict_runner(mnist):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.int32, [None])
        train = model(x, y)
        sess = session(g)
        sess.run(tf.global_variables_initializer())

    def run(n):
        start = time.perf_counter()
        for _ in range(n):
            bx, by = mnist.train.next_batch(args.batch)
            sess.run(train, feed_dict={x: bx, y: by.astype(np.int32)})
        return n * args.batch / (time.perf_counter() - start)
    return run


def dataset_runner(mnist):
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((mnist.train.images, mnist.train.labels.astype(np.int32)))
        ds = ds.shuffle(10000).repeat().batch(args.batch).prefetch(2)
        x, y = ds.make_one_shot_iterator().get_next()
        train = model(x, y)
        sess = session(g)
        sess.run(tf.global_variables_initializer())

    def run(n):
        start = time.perf_counter()
        for _ in range(n):
            sess.run(train)
        return n * args.batch / (time.perf_counter() - start)
    return run


def main():
    mnist = input_data.read_data_sets(tempfile.mkdtemp(prefix="df_bench_"), one_hot=False)
    runners = {"feed_dict": feed_dict_runner(mnist), "tf.data": dataset_runner(mnist)}
    for run in runners.values():
        run(5)  # warm-up: kernels made, buffers allocated, the pipeline filled
    results = {k: [] for k in runners}
    for r in range(args.rounds):
        for name, run in runners.items():
            results[name].append(run(args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f} examples/s" for k, v in results.items()), flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"median: feed_dict {med['feed_dict']:.0f} examples/s, tf.data {med['tf.data']:.0f} examples/s, "
          f"tf.data / feed_dict = {med['tf.data'] / med['feed_dict']:.3f}")


if __name__ == "__main__":
    main()
