"""Tensor fusion's effect on a training step: the same model (a deep MLP of
many small layers, so many small gradients) trained by hvd.DistributedOptimizer
with every gradient reduced alone (HOROVOD_FUSION_THRESHOLD=0) and fused
(the default, 64 MiB), and, with --cycle-ms > 0, fused at run time with
that cycle time (HOROVOD_CYCLE_TIME: every gradient its own op, those ready
within one cycle reduced together), in one run of the same processes,
alternating blocks of steps so that load on the machine hits all alike.
Rank 0 prints one JSON line: median ms per step of each and the ratios.

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
parser.add_argument("--cycle-ms", type=float, default=1.0,
                    help="HOROVOD_CYCLE_TIME of the run-time fused variant (0: leave it out)")
args = parser.parse_args()


def model(scope, threshold, x, cycle_ms=None):
    with tf.variable_scope(scope):
        h = x
        for i in range(args.layers):
            h = tf.layers.dense(h, args.width, activation=tf.nn.relu, name=f"dense{i}")
        loss = tf.reduce_mean(tf.square(tf.layers.dense(h, 1, name="out")))
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(threshold)
        if cycle_ms is None:
            os.environ.pop("HOROVOD_CYCLE_TIME", None)
        else:
            os.environ["HOROVOD_CYCLE_TIME"] = str(cycle_ms)
        opt = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(1e-4))
        return opt.minimize(loss, var_list=tf.trainable_variables(scope))


def main():
    hvd.init()
    x = tf.placeholder(tf.float32, [None, args.width])
    trains = {"unfused": model("unfused", 0, x), "fused": model("fused", 64 << 20, x)}
    if args.cycle_ms > 0:
        trains["cycle"] = model("cycle", 64 << 20, x, args.cycle_ms)
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
        report = {"ranks": hvd.size(), "layers": args.layers, "width": args.width,
                  "gradients": 2 * (args.layers + 1), "unfused_ms_per_step": round(ms["unfused"], 3),
                  "fused_ms_per_step": round(ms["fused"], 3),
                  "speedup": round(ms["unfused"] / ms["fused"], 2)}
        if "cycle" in ms:
            report.update({"cycle_ms": args.cycle_ms, "cycle_fused_ms_per_step": round(ms["cycle"], 3),
                           "speedup_cycle": round(ms["unfused"] / ms["cycle"], 2)})
        report["loadavg_1min"] = os.getloadavg()[0]
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
