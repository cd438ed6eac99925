"""RPCs and CPU per global step of examples/python/sparse_embedding.py
(docs/PERFORMANCE.md, "Sparse embeddings on parameter servers").

Runs the example under distflow-launch (2 ps + 2 workers by default) with a
status port per task, reads every task's /metrics while it runs (the last
reading before the task ends is kept), and prints the RPCs each task
answered (`distflow_rpc_server_handled_total`, by method) per global step,
and the CPU seconds of all tasks together per global step (user + system of
the launcher's children: the whole job, start-up included, so compare runs
of one length).

  PYTHONPATH=build/python /usr/bin/python3 bench/sparse_step_rpcs.py --build build \
      --steps 400 [-- extra flags for the example, e.g. --vocab=1000000]
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(SOURCE, "build"))
    p.add_argument("--steps", type=int, default=400, help="global steps (--last_step of the example)")
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("extra", nargs="*", help="flags for the example")
    a = p.parse_args()
    tasks = a.ps + a.workers
    # distflow-launch gives task k (ps first, then workers) the port base + k.
    while True:
        base = free_port()
        if all(_bindable(base + k) for k in range(tasks)):
            break
    last, stop = {}, threading.Event()

    def scrape():
        while not stop.is_set():
            for k in range(tasks):
                try:
                    last[k] = urllib.request.urlopen(f"http://127.0.0.1:{base + k}/metrics", timeout=2).read().decode()
                except Exception:  # not up yet, or gone
                    pass
            stop.wait(0.2)

    t = threading.Thread(target=scrape)
    t.start()
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    out = subprocess.run([os.path.join(a.build, "tools", "distflow-launch"), "--ps", str(a.ps), "--workers",
                          str(a.workers), "--status_base_port", str(base), "--", sys.executable,
                          os.path.join(SOURCE, "examples", "python", "sparse_embedding.py"),
                          f"--last_step={a.steps}", "--measure_from=20", "--measure_steps=60"] + a.extra,
                         env=env, capture_output=True, text=True)
    elapsed = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    t.join()
    for line in out.stdout.splitlines():
        if "Worker" in line or "bytes" in line:
            print(line)
    if out.returncode:
        print(out.stdout[-3000:], out.stderr[-3000:])
        sys.exit(1)
    names = [f"ps{k}" for k in range(a.ps)] + [f"worker{k}" for k in range(a.workers)]
    per_method = {}
    for k, text in last.items():
        for line in text.splitlines():
            m = re.match(r'distflow_rpc_server_handled_total\{(.*)\} ([0-9.e+]+)', line)
            if m:
                method = re.search(r'method="[^"]*/([^"/]+)"', m.group(1)).group(1)
                per_method.setdefault(method, {}).setdefault(names[k], 0.0)
                per_method[method][names[k]] += float(m.group(2))
    print(f"RPCs answered per global step ({a.steps} global steps, all tasks):")
    for method in sorted(per_method):
        by_task = per_method[method]
        total = sum(by_task.values()) / a.steps
        if total < 0.005:
            continue
        detail = ", ".join(f"{n} {by_task[n] / a.steps:.2f}" for n in names if n in by_task)
        print(f"  {method:<24} {total:6.2f}  ({detail})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"CPU of all tasks: {cpu:.1f} s in {elapsed:.1f} s, {1000 * cpu / a.steps:.2f} ms per global step "
          f"(start-up included)")


def _bindable(port):
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


if __name__ == "__main__":
    main()
