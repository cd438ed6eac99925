#!/usr/bin/env python3
"""Where the CPU of examples/python/sparse_embedding.py's job goes, per
process and per global step (docs/PERFORMANCE.md, "Sparse embeddings on
parameter servers", "The CPU of a global step").

Runs the example under distflow-launch (2 ps + 2 workers, the
1,000,000 x 64 table, `mod`) with a status port per task, waits for
--warmup global steps, then over a window of --seconds reads each
process's CPU (user + system of all its threads, /proc/<pid>/task/*/stat)
and, unless --no-perf, `perf record -g` samples of the four processes. The
global steps in the window are the RunGraph calls the ps tasks answered in
it (one per ps per global step; `distflow_rpc_server_handled_total`). It
prints, per process, CPU ms per global step, its split by the groups of
bench/profile_cluster.py (kernels, copies, serialisation, gRPC, waiting,
allocation, ...), CPU by thread group and, with --top N, the N leaf symbols
costing the most CPU per global step in each process.

  PYTHONPATH=build/python /usr/bin/python3 bench/sparse_step_profile.py --build build \
      [--warmup 600] [--seconds 8] [--top 25] [--rounds N] [-- extra flags for the example]

With --rounds N the job runs N times and the CPU per global step of each
process is printed for every round (the perf table only for the last):
compare two builds by alternating their runs, not by steps/s.
"""
import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import profile_cluster as pc  # noqa: E402  (its /proc readers and perf classifiers)

sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402


def descendants(pid):
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out.extend(descendants(k))
    return out


def task_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    job = next((a.split("=", 1)[1] for a in args if a.startswith("--job_name=")), None)
    idx = next((a.split("=", 1)[1] for a in args if a.startswith("--task_index=")), None)
    if job is None or idx is None:
        return None
    return f"{job}{idx}"


def run_graphs(ports):
    total = 0.0
    for p in ports:
        vals = pc.scrape(p)
        total += sum(v for k, v in vals.items()
                     if k.startswith("distflow_rpc_server_handled_total") and "RunGraph" in k)
    return total


def short(sym):
    """A symbol without its parameter list (which may hold parentheses)."""
    sym = sym.strip()
    if sym.endswith(")"):
        depth = 0
        for i in range(len(sym) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(sym[i], 0)
            if depth == 0:
                sym = sym[:i]
                break
    return re.sub(r"^(distflow::)\(anonymous namespace\)::", r"\1", sym)[:100]


def cpu_ticks(threads):
    return sum(t[1][0] + t[1][1] for t in threads.values())


def profile_once(a, perf_on, logs):
    tasks = a.ps + a.workers
    while True:
        base = free_port()
        if all(_bindable(base + k) for k in range(tasks)):
            break
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"))
    log = open(os.path.join(logs, "job.log"), "w")
    launch = subprocess.Popen([os.path.join(a.build, "tools", "distflow-launch"), "--ps", str(a.ps), "--workers",
                               str(a.workers), "--status_base_port", str(base), "--", sys.executable,
                               os.path.join(SOURCE, "examples", "python", "sparse_embedding.py"),
                               f"--last_step={a.last_step}", f"--vocab={a.vocab}", "--measure_from=20",
                               "--measure_steps=60"] + a.extra, env=env, stdout=log, stderr=subprocess.STDOUT)
    ps_ports = [base + k for k in range(a.ps)]
    try:
        deadline = time.time() + 600
        while run_graphs(ps_ports) < a.warmup * a.ps:
            if launch.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the job ended or stalled before the warm-up (log in {logs}/job.log)")
            time.sleep(0.2)
        procs = {}
        for pid in descendants(launch.pid):
            name = task_of(pid)
            if name and name not in procs:
                procs[name] = pid
        names = sorted(procs, key=lambda n: (not n.startswith("ps"), n))
        pids = [procs[n] for n in names]
        g0 = run_graphs(ps_ports)
        before = {pid: pc.read_threads(pid) for pid in pids}
        perf = None
        data = os.path.join(logs, "perf.data")
        if perf_on:
            perf = subprocess.Popen(["perf", "record", "-q", "-F", str(a.freq), "-e", "cpu-clock", "-g", "-o", data,
                                     "-p", ",".join(map(str, pids))], stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(logs, "perf.err"), "w"))
        time.sleep(a.seconds)
        after = {pid: pc.read_threads(pid) for pid in pids}
        g1 = run_graphs(ps_ports)
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=300)
        load = os.getloadavg()
    finally:
        launch.wait(timeout=900)
    steps = (g1 - g0) / a.ps
    result = {"steps": steps, "seconds": a.seconds, "load": load, "procs": []}
    samples = pc.perf_samples(data) if perf_on else []
    for name, pid in zip(names, pids):
        ticks = cpu_ticks(after[pid]) - cpu_ticks({t: v for t, v in before[pid].items() if t in after[pid]})
        groups = collections.Counter()
        for tid, (comm, t, _) in after[pid].items():
            b = before[pid].get(tid, (comm, (0, 0), (0, 0)))
            groups[pc.thread_group(comm)] += t[0] + t[1] - b[1][0] - b[1][1]
        cats, syms, incl = collections.Counter(), collections.Counter(), collections.Counter()
        switches = sum(t[2][0] + t[2][1] for t in after[pid].values()) - sum(
            t[2][0] + t[2][1] for tid, t in before[pid].items() if tid in after[pid])
        for spid, _, frames in samples:
            if spid == pid:
                cats[pc.classify(frames)] += 1
                s, d = frames[0] if frames else ("?", "?")
                syms[short(s) + f"  [{os.path.basename(d)}]"] += 1
                # Inclusive: each distflow or Python-binding function on the chain, once.
                incl.update({short(f) for f, dso in frames if "distflow" in dso or "distflow" in f})
        result["procs"].append({"name": name, "cpu_ms": 1000.0 * ticks / pc.CLK_TCK / steps, "cats": cats,
                                "syms": syms, "incl": incl, "threads": groups,
                                "switches": switches / steps})
    return result


def report(r, top):
    lines = [f"{r['steps']:.0f} global steps in {r['seconds']:.0f} s ({r['steps'] / r['seconds']:.0f}/s), "
             f"load average {r['load'][0]:.1f}", ""]
    hdr = ["process", "CPU ms/step"] + pc.GROUPS
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for p in r["procs"]:
        n = sum(p["cats"].values())
        row = [p["name"], f"{p['cpu_ms']:.3f}"] + [f"{p['cpu_ms'] * p['cats'][g] / n:.3f}" if n else "-"
                                                 for g in pc.GROUPS]
        lines.append("| " + " | ".join(row) + " |")
    lines.append(f"| all | {sum(p['cpu_ms'] for p in r['procs']):.3f} |")
    lines.append("")
    for p in r["procs"]:
        total = sum(p["threads"].values()) or 1
        lines.append(f"- {p['name']} threads: " + ", ".join(
            f"{g} {p['cpu_ms'] * v / total:.3f}" for g, v in p["threads"].most_common(8) if v > 0))
    if top:
        for p in r["procs"]:
            n = sum(p["syms"].values())
            if not n:
                continue
            lines += ["", f"{p['name']}: top symbols, CPU ms per global step "
                      f"({p['switches']:.1f} context switches per global step)"]
            for s, c in p["syms"].most_common(top):
                lines.append(f"  {p['cpu_ms'] * c / n:7.3f}  {s}")
            lines += ["", f"{p['name']}: distflow functions, inclusive CPU ms per global step"]
            for s, c in p["incl"].most_common(top):
                lines.append(f"  {p['cpu_ms'] * c / n:7.3f}  {s}")
    return "\n".join(lines)


def _bindable(port):
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(SOURCE, "build"))
    p.add_argument("--ps", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1000000)
    p.add_argument("--warmup", type=int, default=600, help="global steps before the window")
    p.add_argument("--seconds", type=float, default=8.0, help="length of the window")
    p.add_argument("--last_step", type=int, default=0, help="the job's length (default: enough for the window)")
    p.add_argument("--freq", type=int, default=999)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--no-perf", dest="perf", action="store_false")
    p.add_argument("extra", nargs="*", help="flags for the example")
    a = p.parse_args()
    if not a.last_step:
        a.last_step = a.warmup + int(a.seconds * 1500) + 500
    logs = tempfile.mkdtemp(prefix="sparse_profile_")
    print(f"(logs and perf.data in {logs})", file=sys.stderr)
    for i in range(a.rounds):
        last = i == a.rounds - 1
        r = profile_once(a, a.perf and last, logs)
        print(f"round {i + 1}: " + ", ".join(f"{q['name']} {q['cpu_ms']:.3f}" for q in r["procs"]) +
              f"; all {sum(q['cpu_ms'] for q in r['procs']):.3f} CPU ms per global step "
              f"({r['steps']:.0f} steps, load {r['load'][0]:.1f})", flush=True)
        if last:
            print(report(r, a.top if a.perf else 0))


if __name__ == "__main__":
    main()
