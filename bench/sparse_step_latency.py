"""Latency and CPU per step of examples/python/sparse_embedding.py's model
on an in-process cluster (docs/PERFORMANCE.md, "Sparse embeddings on
parameter servers"): 2 ps tasks and 1 worker in this one process, so the
process's CPU time is every task's, and one client running steps back to
back, so a step's latency is its critical path (no second worker competing).

Prints the median and quartiles of the step's latency and the CPU of all
tasks per step over --steps steps (after 50 warm-up steps). With --trace N,
also traces N steps and prints the timeline of the fastest one, per task:
when each partition started, when each _Recv was issued and when its tensor
arrived (its end), and the kernels that took longer than 30 us, which shows
what a step waits on.

  PYTHONPATH=build/python /usr/bin/python3 bench/sparse_step_latency.py [--steps 300] [--trace 20]

Compare two builds by running it alternately with each build's PYTHONPATH:
on a loaded machine only such interleaved runs mean anything.
"""
import argparse
import json
import resource
import time

import numpy as np

import distflow
import distflow.compat.v1 as tf


def build(vocab, dim, strategy):
    jobs = distflow._distflow.local_cluster_spec(2, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    servers = [distflow._distflow.Server(cluster._jobs, "ps", i, -1) for i in range(2)]
    servers.append(distflow._distflow.Server(cluster._jobs, "worker", 0, -1))
    for s in servers:
        s.start()
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        table = tf.get_variable("emb", [vocab, dim], initializer=tf.random_uniform_initializer(-0.05, 0.05),
                                partitioner=tf.fixed_size_partitioner(2))
        ids = tf.placeholder(tf.int64, [None, 8], name="ids")
        labels = tf.placeholder(tf.float32, [None, 1], name="labels")
        rows = tf.nn.embedding_lookup(table, ids, partition_strategy=strategy)
        logits = tf.layers.dense(tf.reduce_mean(rows, axis=1), 1)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        train = tf.train.AdagradOptimizer(0.5).minimize(loss, global_step=global_step)
    rng = np.random.RandomState(4)
    # The example's batches: 64 bags of 8 power-law ids.
    feeds = [{ids: np.minimum(rng.zipf(1.3, size=(64, 8)) - 1, vocab - 1),
              labels: (rng.rand(64, 1) > 0.5).astype(np.float32)} for _ in range(64)]
    return servers, [train, global_step, loss], feeds


def print_timeline(trace):
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    xs = sorted([e for e in trace["traceEvents"] if e.get("ph") == "X"], key=lambda e: e["ts"])
    for pid in sorted(names):
        mine = [e for e in xs if e["pid"] == pid]
        print("  %s: partition's first node at %d us" % (names[pid], mine[0]["ts"]))
        for e in mine:
            if e["name"] in ("_Send", "_Recv") or e["dur"] > 30:
                print("    %6d +%5d us  %-20s %s" % (e["ts"], e["dur"], e["name"], e["args"]["name"][:70]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--vocab", type=int, default=100000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--partition_strategy", choices=["mod", "div"], default="mod", help="as the example's flag")
    p.add_argument("--trace", type=int, default=0, help="trace this many steps; print the fastest one's timeline")
    a = p.parse_args()
    servers, fetches, feeds = build(a.vocab, a.dim, a.partition_strategy)
    try:
        with tf.Session(servers[2].target) as sess:
            sess.run(tf.global_variables_initializer())
            for i in range(50):
                sess.run(fetches, feeds[i % len(feeds)])
            lat = []
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.time()
            for i in range(a.steps):
                s = time.perf_counter()
                sess.run(fetches, feeds[i % len(feeds)])
                lat.append(time.perf_counter() - s)
            r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.time()
            best = None
            for i in range(a.trace):
                md = tf.RunMetadata()
                sess.run(fetches, feeds[i % len(feeds)], options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                         run_metadata=md)
                trace = json.loads(bytes(md.step_stats).decode())
                xs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
                span = max(e["ts"] + e["dur"] for e in xs) - min(e["ts"] for e in xs)
                if best is None or span < best[0]:
                    best = (span, trace)
    finally:
        for s in servers:
            s.stop()
    lat = np.array(lat) * 1e3
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / a.steps * 1e3
    print("step latency: median %.2f ms (quartiles %.2f-%.2f), CPU of all tasks %.2f ms per step, %.1f steps/s" %
          (np.median(lat), np.percentile(lat, 25), np.percentile(lat, 75), cpu, a.steps / (t1 - t0)))
    if best is not None:
        print("fastest of %d traced steps: %d us from its first node to its last" % (a.trace, best[0]))
        print_timeline(best[1])


if __name__ == "__main__":
    main()
