"""The calls one worker step of the README's cluster makes, and the context
switches per global step (docs/PERFORMANCE.md, "gRPC calls per worker step").

Starts 1 ps + N asynchronous workers of mnist_distributed (the book's CNN,
batch 50) on this machine's loopback, as bench/profile_cluster.py does, and
over a window of global steps taken after a warm-up reads every task's
/metrics and /proc/<pid>/task/*/status at both ends. Per worker step (the sum
of the workers' distflow_steps_total: in asynchronous training every worker
step is one global step) it prints

  * the RPCs every task answered, by method and by the task that answered
    (distflow_rpc_server_handled_total): RunGraph and RecvTensor on the ps
    are the workers' calls, RecvTensor on a worker the ps's fetches of what
    the worker computed for it; Heartbeat and the rest are the cluster's own,
  * the RPCs every task received by transport (distflow_rpc_server_calls_total:
    unix for a task on this host through its abstract socket, or tcp),
  * the bulk transfers the processes' clients made, by transport and
    direction (distflow_bulk_client_transfers_total: a large tensor's bytes
    through shared memory or TCP, fetched or put; not gRPC calls),
  * context switches per global step, voluntary and all, per process.

Counts, not times: they do not depend on the machine's load (a window edge
may cut one step's calls in two, so expect +-0.02).

  /usr/bin/python3 bench/step_rpcs.py --build build [--warmup 40] [--steps 300]
      [--config 'NAME::--defer_updates ENV=VALUE' ...]

Each --config (repeatable) runs the cluster once with those extra flags for
every task (or VAR=VALUE for their environment, or build=DIR for another
build's binaries, e.g. the code before a change); without one, the defaults.
With --rounds N, N interleaved rounds of all configurations.
"""

import argparse
import collections
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import profile_cluster as pc  # noqa: E402


def snapshot(pids, status):
    metrics = [pc.scrape(p) for p in status]
    threads = [pc.read_threads(pid) for pid in pids]
    return metrics, threads


def ctx_switches(before, after):
    vol = invol = 0
    for tid, (_, _, sw) in after.items():
        b = before.get(tid, (None, None, (0, 0)))[2]
        vol += sw[0] - b[0]
        invol += sw[1] - b[1]
    return vol, invol


def by_label(vals, name, label):
    out = collections.Counter()
    for k, v in vals.items():
        if k.split("{")[0] != name:
            continue
        m = re.search(label + r'="([^"]*)"', k)
        out[m.group(1) if m else ""] += v
    return out


def measure(args, name, extra, logs):
    build = args.build
    for word in [w for w in extra if w.startswith("build=")]:
        build = word.partition("=")[2]
        extra.remove(word)
    run = argparse.Namespace(build=build, workers=args.workers, warmup=args.warmup, steps=args.steps,
                             tail=args.tail, intra_op_threads=args.intra_op_threads, perf=False, extra=extra)
    names, procs, status = pc.start_cluster(run, logs)
    try:
        g0, _ = pc.wait_steps(logs, args.workers, procs, args.warmup, timeout=900)
        pids = [p.pid for p in procs]
        m0, t0 = snapshot(pids, status)
        pc.wait_steps(logs, args.workers, procs, g0 + args.steps, timeout=1800)
        m1, t1 = snapshot(pids, status)
    finally:
        for p in procs:
            try:
                p.wait(timeout=300)
            except Exception:  # noqa: BLE001
                p.kill()
    steps = sum(pc.metric_sum(m1[i], "distflow_steps_total", 'status="OK"') -
                pc.metric_sum(m0[i], "distflow_steps_total", 'status="OK"') for i in range(1, len(names)))
    print(f"\n## {name}: {steps:.0f} worker steps in the window (extra: {' '.join(extra) or 'none'})")
    rpcs = collections.defaultdict(dict)
    for i, task in enumerate(names):
        after = by_label(m1[i], "distflow_rpc_server_handled_total", "method")
        before = by_label(m0[i], "distflow_rpc_server_handled_total", "method")
        for method, v in after.items():
            d = v - before.get(method, 0)
            if d > 0:
                rpcs[method.rsplit("/", 1)[-1]][task] = d / steps
    total = 0.0
    print("| RPC (answered by) | per worker step | by task |\n| --- | ---: | --- |")
    for method in sorted(rpcs):
        per = sum(rpcs[method].values())
        total += per
        detail = ", ".join(f"{t} {v:.2f}" for t, v in rpcs[method].items())
        print(f"| {method} | {per:.2f} | {detail} |")
    print(f"| **all RPCs** | **{total:.2f}** | |")
    # The transport the calls came over (unix: a task on this host through
    # its abstract socket, docs/TRANSPORT.md).
    transports = collections.Counter()
    for i in range(len(names)):
        after = by_label(m1[i], "distflow_rpc_server_calls_total", "transport")
        before = by_label(m0[i], "distflow_rpc_server_calls_total", "transport")
        for t, v in after.items():
            transports[t] += v - before.get(t, 0)
    for t, v in sorted(transports.items()):
        print(f"| RPCs received over {t} | {v / steps:.2f} | |")
    bulk = collections.Counter()
    for i in range(len(names)):
        for k, v in m1[i].items():
            if k.split("{")[0] != "distflow_bulk_client_transfers_total":
                continue
            label = ",".join(re.findall(r'="([^"]*)"', k))
            bulk[label] += v - m0[i].get(k, 0)
    for label, v in sorted(bulk.items()):
        print(f"| bulk transfer ({label}) | {v / steps:.2f} | not a gRPC call |")
    print("\n| process | ctx sw / global step | voluntary |\n| --- | ---: | ---: |")
    all_vol = all_sw = 0
    for i, task in enumerate(names):
        vol, invol = ctx_switches(t0[i], t1[i])
        all_vol += vol
        all_sw += vol + invol
        print(f"| {task} | {(vol + invol) / steps:.1f} | {vol / steps:.1f} |")
    print(f"| **all** | **{all_sw / steps:.1f}** | **{all_vol / steps:.1f}** |")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return total, all_vol / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=40, help="global steps before the window")
    ap.add_argument("--steps", type=int, default=300, help="global steps in the window")
    ap.add_argument("--tail", type=int, default=60, help="global steps after the window")
    ap.add_argument("--intra_op_threads", type=int, default=None)
    ap.add_argument("--config", action="append", default=[], help="NAME::words; repeatable")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    configs = [c.split("::", 1) for c in args.config] or [["defaults", ""]]
    for r in range(args.rounds):
        for name, words in configs:
            with tempfile.TemporaryDirectory(prefix="step_rpcs_") as logs:
                measure(args, f"{name} (round {r + 1})", words.split(), logs)


if __name__ == "__main__":
    main()
