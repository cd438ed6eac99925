#!/usr/bin/python3
"""Control flow's cost, in one run (docs/PERFORMANCE.md records one):

1. tf.while_loop overhead per iteration: a loop of N iterations whose body
   is one scalar Add (plus the counter's), against a straight-line graph of
   the same N Adds, 1 intra-op thread. Reported: microseconds per iteration
   of each and their difference; the loop with back_prop=True (the forward
   loop also keeps every iteration's values for a gradient) and False.
2. A 1-layer LSTM training step: tf.nn.dynamic_rnn (BasicLSTMCell, 128
   units, 28 steps of 28 inputs, batch 64, a dense layer to 10 classes,
   softmax cross-entropy, plain SGD) as a while_loop and unrolled, against
   PyTorch's nn.LSTM with the same shapes, 1 thread each.

    bench/control_flow_bench.py [BUILD_DIR] [--rounds N] [--iters N] [--steps N]

Each measurement alternates with the others `rounds` times, so a slow spell
of the machine hits all of them; prints every round and the medians.
"""
import argparse
import os
import statistics
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("build", nargs="?", default="build")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--iters", type=int, default=1000, help="while_loop iterations")
parser.add_argument("--steps", type=int, default=20, help="LSTM training steps per round")
parser.add_argument("--no-torch", action="store_true")
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))

import numpy as np  # noqa: E402

import distflow.compat.v1 as tf  # noqa: E402
from distflow import rnn as df_rnn  # noqa: E402


def session(graph):
    return tf.Session(graph=graph, config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                                         inter_op_parallelism_threads=1))


def timed(run, reps):
    run()  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        run()
    return (time.perf_counter() - t0) / reps


# ---- 1. while_loop overhead ----

def loop_runner(n, back_prop):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        _, y = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v + 1.0), [0, x], back_prop=back_prop)
    sess = session(g)
    assert sess.run(y, {x: 0.0}) == float(n)
    return lambda: sess.run(y, {x: 0.0})


def straight_runner(n):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [])
        v = x
        for _ in range(n):
            v = v + 1.0
    sess = session(g)
    assert sess.run(v, {x: 0.0}) == float(n)
    return lambda: sess.run(v, {x: 0.0})


# ---- 2. LSTM training step ----

B, T, D, H, C = 64, 28, 28, 128, 10


def lstm_runner(while_loop, xs, ys):
    df_rnn.USE_WHILE_LOOP = while_loop
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [B, T, D])
        y = tf.placeholder(tf.int32, [B])
        cell = tf.nn.rnn_cell.BasicLSTMCell(H)
        out, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        logits = tf.layers.dense(out[:, -1], C)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.global_variables_initializer()
    sess = session(g)
    sess.run(init)
    feed = {x: xs, y: ys}
    return lambda: sess.run([train, loss], feed)


def torch_runner(xs, ys):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(D, H, batch_first=True)
    dense = torch.nn.Linear(H, C)
    opt = torch.optim.SGD(list(lstm.parameters()) + list(dense.parameters()), lr=0.1)
    x = torch.from_numpy(xs)
    y = torch.from_numpy(ys.astype(np.int64))

    def step():
        opt.zero_grad()
        out, _ = lstm(x)
        loss = torch.nn.functional.cross_entropy(dense(out[:, -1]), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def main():
    rng = np.random.default_rng(0)
    n = args.iters
    runs = {
        "while_loop back_prop=True": loop_runner(n, True),
        "while_loop back_prop=False": loop_runner(n, False),
        "straight-line": straight_runner(n),
    }
    xs = rng.standard_normal((B, T, D)).astype(np.float32)
    ys = rng.integers(0, C, B).astype(np.int32)
    lstm = {"dynamic_rnn (while_loop)": lstm_runner(True, xs, ys), "dynamic_rnn (unrolled)": lstm_runner(False, xs, ys)}
    if not args.no_torch:
        lstm["PyTorch nn.LSTM"] = torch_runner(xs, ys)
    per_iter = {k: [] for k in runs}
    step_ms = {k: [] for k in lstm}
    for r in range(args.rounds):
        for k, run in runs.items():
            per_iter[k].append(timed(run, 5) / n * 1e6)
        for k, run in lstm.items():
            step_ms[k].append(timed(run, args.steps) * 1e3)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} us/iter" for k, v in per_iter.items()) + "; " +
              ", ".join(f"{k} {v[-1]:.1f} ms/step" for k, v in step_ms.items()), flush=True)
    med = {k: statistics.median(v) for k, v in per_iter.items()}
    print(f"\nwhile_loop, {n} iterations of one scalar Add, 1 thread (median of {args.rounds} rounds):")
    for k, v in med.items():
        print(f"  {k:28s} {v:8.2f} us per iteration")
    base = med["straight-line"]
    for k in ("while_loop back_prop=True", "while_loop back_prop=False"):
        print(f"  {k}: {med[k] - base:.2f} us per iteration over straight-line ({med[k] / base:.1f}x)")
    med = {k: statistics.median(v) for k, v in step_ms.items()}
    print(f"\nLSTM training step, batch {B}, {T} steps of {D}, {H} units, 1 thread (median of {args.rounds} rounds):")
    ref = med.get("PyTorch nn.LSTM")
    for k, v in med.items():
        ratio = f" ({v / ref:.2f}x PyTorch)" if ref else ""
        print(f"  {k:28s} {v:8.1f} ms{ratio}")


if __name__ == "__main__":
    main()
