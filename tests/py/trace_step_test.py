#!/usr/bin/python3
"""Step timelines from a real cluster: distflow-launch runs 1 ps + 2 workers of
mnist_distributed with --trace_step; each worker writes the Chrome trace-event
JSON of one step. The test parses each file and checks what Perfetto and
chrome://tracing rely on: a track per task and device, the ops of every task
the step touched, events of one track that are ordered and never overlap,
and each transfer as a flow from a _Send on one task to its _Recv on another.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

from checks import FAILURES, check, finish


def check_trace(path, worker):
    doc = json.load(open(path))
    events = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    ps_dev = "/job:ps/replica:0/task:0/device:CPU:0"
    w_dev = "/job:worker/replica:0/task:%d/device:CPU:0" % worker
    check(sorted(names.values()) == sorted([ps_dev, w_dev]), "%s: tracks %r" % (path, sorted(names.values())))
    pid_of = {v: k for k, v in names.items()}
    ops = {}
    tracks = {}
    for e in events:
        if e["ph"] != "X":
            continue
        check(e["dur"] >= 0 and e["ts"] >= 0, "%s: event %r has a negative time" % (path, e))
        ops.setdefault(e["pid"], set()).add(e["args"]["op"])
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["args"]["name"]))
    for track, spans in tracks.items():
        ordered = sorted(spans)
        for a, b in zip(ordered, ordered[1:]):
            check(a[1] <= b[0], "%s: %s and %s overlap on track %r" % (path, a[2], b[2], track))
    w_ops = ops.get(pid_of.get(w_dev), set())
    ps_ops = ops.get(pid_of.get(ps_dev), set())
    check({"Conv2D", "MatMul", "_Recv", "_Send"} <= w_ops, "%s: the worker ran the model: %r" % (path, sorted(w_ops)))
    check(bool({"ApplyAdam", "FusedApplyAdam"} & ps_ops) and {"_Recv", "_Send"} <= ps_ops,
          "%s: the ps applied Adam and exchanged tensors: %r" % (path, sorted(ps_ops)))
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    check(len(starts) >= 8 and set(starts) == set(ends), "%s: %d flows, each with both ends" % (path, len(starts)))
    crossing = sum(1 for i in starts if i in ends and starts[i]["pid"] != ends[i]["pid"])
    check(crossing == len(starts), "%s: every flow crosses between tasks" % path)
    for i, s in starts.items():
        f = ends.get(i)
        if f is not None:
            check(f["ts"] >= s["ts"] - 1000, "%s: flow %d ends before it starts (beyond clock noise)" % (path, i))
    return len(events)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launch", required=True)
    ap.add_argument("--mnist", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="trace_step_test.")
    cmd = [args.launch, "--ps", "1", "--workers", "2", "--", args.mnist, "--train_steps=60", "--trace_step=15",
           "--trace_file=" + os.path.join(work, "trace_{task}.json"), "--progress=false", "--intra_op_threads=1"]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=400)
    out = run.stdout.decode(errors="replace")
    check(run.returncode == 0, "the cluster exits 0 (got %d)" % run.returncode)
    for w in (0, 1):
        check(("[worker:%d] Worker %d: traced global step" % (w, w)) in out, "worker %d says it wrote its trace" % w)
    files = sorted(glob.glob(os.path.join(work, "trace_*.json")))
    check(len(files) == 2, "one trace per worker: %r" % files)
    for path in files:
        worker = int(path[-6])
        n = check_trace(path, worker)
        print("%s: %d events" % (path, n), flush=True)
    if FAILURES:
        print(out[-5000:])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
