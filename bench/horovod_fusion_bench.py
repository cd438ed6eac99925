"""Tensor fusion's effect on a training step: the same model (a deep MLP of
many small layers, so many small gradients) trained by hvd.DistributedOptimizer
with every gradient reduced alone (HOROVOD_FUSION_THRESHOLD=0) and fused
(the default, 64 MiB), in one run of the same processes, alternating blocks
of steps so that load on the machine hits both alike. Rank 0 prints one
JSON line: median ms per step of each and the ratio.

    distflow-launch --ps 0 --workers 2 -- python3 bench/horovod_fusion_bench.py --layers 24 --width 64
(bench/run_fusion_bench.sh)"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import distflow.compat.v1 as tf
import distflow.horovod.tensorflow as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=24)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--blocks", type=int, default=6, help="alternating blocks of each kind")
parser.add_argument("--steps", type=int, default=20, help="timed steps per block")
args = parser.parse_args()


def model(scope, threshold, x):
    with tf.variable_scope(scope):
        h = x
        for i in range(args.layers):
            h = tf.layers.dense(h, args.width, activation=tf.nn.relu, name=f"dense{i}")
        loss = tf.reduce_mean(tf.square(tf.layers.dense(h, 1, name="out")))
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(threshold)
        opt = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(1e-4))
        return opt.minimize(loss, var_list=tf.trainable_variables(scope))


def main():
    hvd.init()
    x = tf.placeholder(tf.float32, [None, args.width])
    trains = {"unfused": model("unfused", 0, x), "fused": model("fused", 64 << 20, x)}
    feed = {x: np.random.RandomState(hvd.rank()).rand(args.batch, args.width).astype(np.float32)}
    times = {k: [] for k in trains}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for k, op in trains.items():  # warm-up
            for _ in range(3):
                sess.run(op, feed_dict=feed)
        for _ in range(args.blocks):
            for k, op in trains.items():
                for _ in range(args.steps):
                    start = time.perf_counter()
                    sess.run(op, feed_dict=feed)
                    times[k].append(time.perf_counter() - start)
    if hvd.rank() == 0:
        ms = {k: 1000 * statistics.median(v) for k, v in times.items()}
        print(json.dumps({"ranks": hvd.size(), "layers": args.layers, "width": args.width,
                          "gradients": 2 * (args.layers + 1), "unfused_ms_per_step": round(ms["unfused"], 3),
                          "fused_ms_per_step": round(ms["fused"], 3),
                          "speedup": round(ms["unfused"] / ms["fused"], 2),
                          "loadavg_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
