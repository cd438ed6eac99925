#!/usr/bin/python3
"""Soak: the book's program on 1 ps + N workers for a long time (30 minutes
by default), sampling every task's resident memory and thread count and the
chief's global step, then a verdict on growth. Not part of the test suite.

    /usr/bin/python3 bench/soak.py --build build --minutes 30 > soak.md

Prints a Markdown report (for docs/PERFORMANCE.md): per task, RSS and threads
after the warm-up and at the end; steps/s per interval. Exits 1 if a task
died, a task's RSS grew by more than --rss_growth_pct after the warm-up, or
its thread count grew by more than --thread_growth.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from ports import free_port  # noqa: E402


def proc_status(pid):
    """(RSS in MiB, threads) of `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024.0
    threads = int(re.search(r"Threads:\s+(\d+)", text).group(1))
    return rss, threads


def last_step(path):
    try:
        with open(path, errors="replace") as f:
            steps = re.findall(r"Worker : \d+, Step: (\d+)", f.read())
    except OSError:
        return None
    return int(steps[-1]) if steps else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--sample_secs", type=float, default=30)
    ap.add_argument("--warmup_minutes", type=float, default=2)
    ap.add_argument("--rss_growth_pct", type=float, default=20)
    ap.add_argument("--thread_growth", type=int, default=4)
    args = ap.parse_args()

    program = os.path.join(args.build, "examples", "mnist_distributed")
    if not os.access(program, os.X_OK):
        sys.exit(f"soak: {program} is not built; build the project first or pass --build")
    spec = (f"ps|127.0.0.1:{free_port()},worker|" +
            ";".join(f"127.0.0.1:{free_port()}" for _ in range(args.workers)))
    logdir = tempfile.mkdtemp(prefix="distflow_soak_")
    tasks = [("ps", 0)] + [("worker", i) for i in range(args.workers)]
    procs, logs = [], []
    for job, i in tasks:
        log = os.path.join(logdir, f"{job}{i}.log")
        logs.append(log)
        procs.append(subprocess.Popen(
            [program, f"--cluster_spec={spec}", f"--job_name={job}", f"--task_index={i}",
             "--train_steps=100000000", "--print_every=100", f"--logdir={logdir}/train",
             "--save_checkpoint_steps=5000", "--progress=false"],
            stdout=open(log, "w"), stderr=subprocess.STDOUT))

    names = [f"/job:{job}/task:{i}" for job, i in tasks]
    samples = []  # (seconds, [(rss, threads) or None per task], step)
    start = time.monotonic()
    end = start + args.minutes * 60
    died = []
    try:
        while time.monotonic() < end:
            time.sleep(args.sample_secs)
            now = time.monotonic() - start
            stats = [proc_status(p.pid) if p.poll() is None else None for p in procs]
            samples.append((now, stats, last_step(logs[1])))
            died = [names[k] for k, p in enumerate(procs) if p.poll() is not None]
            if died:
                break
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()

    warm = next((s for s in samples if s[0] >= args.warmup_minutes * 60), samples[0] if samples else None)
    last = samples[-1] if samples else None
    failed = bool(died)
    print(f"## Soak: the book's program, 1 ps + {args.workers} workers, {args.minutes:g} minutes\n")
    print(f"Sampled every {args.sample_secs:g} s; growth is measured from the first sample after "
          f"{args.warmup_minutes:g} minutes (allowed: {args.rss_growth_pct:g}% RSS, {args.thread_growth} threads).\n")
    print("| task | RSS after warm-up (MiB) | RSS at end (MiB) | threads after warm-up | threads at end | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, name in enumerate(names):
        a = warm[1][k] if warm else None
        b = last[1][k] if last else None
        if a is None or b is None:
            print(f"| {name} | - | - | - | - | died |")
            failed = True
            continue
        grew = (b[0] - a[0]) / a[0] * 100 > args.rss_growth_pct or b[1] - a[1] > args.thread_growth
        failed |= grew
        print(f"| {name} | {a[0]:.0f} | {b[0]:.0f} | {a[1]} | {b[1]} | {'GREW' if grew else 'ok'} |")
    print("\n| interval (min) | global steps/s |")
    print("| --- | --- |")
    prev = None
    for t, _, step in samples:
        if prev is not None and step is not None and prev[1] is not None and t > prev[0]:
            print(f"| {prev[0] / 60:.1f}-{t / 60:.1f} | {(step - prev[1]) / (t - prev[0]):.1f} |")
        prev = (t, step)
    if died:
        print(f"\nTasks that died: {', '.join(died)} (logs in {logdir})")
    print(f"\nVerdict: {'FAIL' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
