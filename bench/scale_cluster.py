#!/usr/bin/python3
"""The book's program at scale on one machine (issue 30): 1 ps + (N - 1)
workers of examples/mnist_distributed (softmax model, asynchronous), every
task its own process on loopback, for each N of --tasks. Reports, per N:

- servers up: seconds from starting the tasks until every task's server
  serves (its "Started server for" line; a worker starts its server before
  it reads its shard of the data);
- cluster up: seconds from starting the tasks until every worker trains
  (each worker prints "Worker i: model is ready" once the chief has
  initialised the variables and every task answered);
- heartbeats: RPCs/s the coordinator (ps 0) answers for the membership
  (its /metrics `distflow_rpc_server_handled_total`, methods named
  *Heartbeat*), over the middle of the run;
- memory: resident set (VmRSS) per task, the ps and the median and largest
  worker, sampled while every task trains;
- that every task exited 0, and the chief's test accuracy.

    bench/scale_cluster.py [--build build] [--tasks 8,32,64] [--train_steps N] [-- EXTRA FLAGS]

Extra flags after `--` go to every task (e.g. --intra_op_threads=1).
Only 127.0.0.1 is used. Prints a
Markdown table for docs/PERFORMANCE.md.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import ports  # noqa: E402


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
        return int(m.group(1)) / 1024.0 if m else None
    except OSError:
        return None


def heartbeats(status_port):
    """Heartbeat RPCs the coordinator has answered so far, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{status_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith("distflow_rpc_server_handled_total{") and "eartbeat" in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def run(build, n, train_steps, extra, logs):
    binary = os.path.join(build, "examples", "mnist_distributed")
    addrs = [f"127.0.0.1:{ports.free_port()}" for _ in range(n)]
    spec = f"ps|{addrs[0]},worker|" + ";".join(addrs[1:])
    status_port = ports.free_port()
    common = [binary, f"--cluster_spec={spec}", "--model=softmax", f"--train_steps={train_steps}",
              "--print_every=100000", "--progress=false", "--learning_rate=0.003",
              f"--wait_for_workers_secs={max(120, 4 * n)}", *extra]
    procs, outs = [], []
    start = time.monotonic()
    first_step = {}
    serving = {}
    for i in range(n):
        job, index = ("ps", 0) if i == 0 else ("worker", i - 1)
        args = common + [f"--job_name={job}", f"--task_index={index}"]
        if i == 0:
            args.append(f"--status_port={status_port}")
        out = open(os.path.join(logs, f"n{n}_{job}{index}.log"), "w+")
        procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT))
        outs.append(out)

    def watch():
        while len(first_step) < n - 1 and any(p.poll() is None for p in procs[1:]):
            for i in range(n):
                if i in first_step or (i == 0 and i in serving):
                    continue
                with open(outs[i].name) as f:
                    text = f.read()
                if i not in serving and "Started server for" in text:
                    serving[i] = time.monotonic() - start
                if i == 0:
                    continue
                if f"Worker {i - 1}: model is ready" in text or f"Worker {i - 1} (chief): model is ready" in text:
                    first_step[i] = time.monotonic() - start
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    watcher.join()
    up = max(first_step.values()) if len(first_step) == n - 1 else None
    servers_up = max(serving.values()) if len(serving) == n else None
    # Memory and heartbeats while every task trains.
    rss = [rss_mib(p.pid) for p in procs]
    h0, t0 = heartbeats(status_port), time.monotonic()
    time.sleep(5)
    h1, t1 = heartbeats(status_port), time.monotonic()
    rate = (h1 - h0) / (t1 - t0) if h0 is not None and h1 is not None else None
    codes = [p.wait(timeout=1800) for p in procs]
    total = time.monotonic() - start
    for out in outs:
        out.close()
    with open(os.path.join(logs, f"n{n}_worker0.log")) as f:
        chief = f.read()
    acc = re.search(r"Test-Accuracy: ([0-9.]+)", chief)
    workers = [r for r in rss[1:] if r is not None]
    return {
        "n": n, "servers_up": servers_up, "up": up, "rate": rate, "ps_rss": rss[0], "worker_rss": statistics.median(workers) if workers else None,
        "max_rss": max(workers) if workers else None, "codes": codes, "total": total,
        "acc": float(acc.group(1)) if acc else None,
    }


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--tasks", default="8,32,64")
    ap.add_argument("--train_steps", type=int, default=5000)
    args = ap.parse_args(argv)
    logs = tempfile.mkdtemp(prefix="scale_cluster_")
    print("| tasks | servers up (s) | cluster up (s) | coordinator heartbeats/s | ps RSS (MiB) | worker RSS, median / max (MiB) | "
          "all exited 0 | wall (s) | test accuracy |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    failed = False
    for n in (int(t) for t in args.tasks.split(",")):
        r = run(args.build, n, args.train_steps, extra, logs)
        ok = all(c == 0 for c in r["codes"])
        failed |= not ok
        bad = "" if ok else " (exit codes " + ",".join(str(c) for c in r["codes"]) + ")"
        print(f"| {n} | {fmt(r['servers_up'], '.1f')} | {fmt(r['up'], '.1f')} | {fmt(r['rate'], '.1f')} | {fmt(r['ps_rss'], '.0f')} | "
              f"{fmt(r['worker_rss'], '.0f')} / {fmt(r['max_rss'], '.0f')} | {'yes' if ok else 'no' + bad} | "
              f"{r['total']:.0f} | {fmt(r['acc'], '.4f')} |", flush=True)
    print(f"(logs in {logs})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
