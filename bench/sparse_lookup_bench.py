#!/usr/bin/python3
"""Lookup throughput of one task: rows/s of distflow's Gather (64-float rows
of a --rows x 64 table, --ids random ids per run, run as a target so nothing
is fetched) vs memcpy of the same bytes (numpy.copyto of a contiguous
block) and numpy's own gather (numpy.take), in one process.

  PYTHONPATH=build/python /usr/bin/python3 bench/sparse_lookup_bench.py
Prints one line per measurement and the ratios.
"""
import argparse
import time

import numpy as np

import distflow.compat.v1 as tf


def best_of(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1000000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ids", type=int, default=200000)
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args()
    rng = np.random.RandomState(0)
    table_np = rng.rand(a.rows, a.dim).astype(np.float32)
    ids_np = rng.randint(0, a.rows, size=a.ids).astype(np.int64)
    table = tf.Variable(table_np)
    ids = tf.placeholder(tf.int64, [None])
    gather = tf.gather(table, ids)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        run = lambda: sess.run(gather.op, feed_dict={ids: ids_np})  # noqa: E731
        run()
        t_df = best_of(run, a.repeats)
    src = table_np[:a.ids]
    dst = np.empty_like(src)
    t_memcpy = best_of(lambda: np.copyto(dst, src), a.repeats)
    t_take = best_of(lambda: np.take(table_np, ids_np, axis=0, out=dst), a.repeats)
    mb = a.ids * a.dim * 4 / 1e6
    for what, t in (("distflow Gather", t_df), ("memcpy (numpy.copyto)", t_memcpy), ("numpy.take", t_take)):
        print(f"{what:24s} {a.ids / t / 1e6:7.2f} M rows/s  {mb / t / 1e3:6.2f} GB/s")
    print(f"distflow Gather / memcpy = {t_memcpy / t_df:.2f}  (rows/s ratio); / numpy.take = {t_take / t_df:.2f}")


if __name__ == "__main__":
    main()
