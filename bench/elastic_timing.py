#!/usr/bin/python3
"""Leave and join timings of a running job (issue 30's Measure section).

Runs the book's program (examples/mnist_distributed, softmax model) as
1 ps + 3 workers on loopback, asynchronous and synchronous (--sync_replicas
--elastic: the gradients per step follow the live workers), and in each:

- leave: once the job is past global step 100, worker 2 is SIGKILLed (a
  machine that vanishes). Reported: seconds from the kill to the next global
  step the chief sees (its per-step lines, timestamped as they arrive); the
  longest pause between global steps until 20 more were applied (in
  synchronous training the step in flight may complete at once with the
  dead worker's gradient, and the next wait until it is declared dead),
  beside the usual pause over the 20 steps before; and the steps lost: global steps that had been reached and had to be reached
  again (a session recreated from a checkpoint), plus, in synchronous
  training, the stale gradients the chief dropped over the whole run
  divided by the gradients per step (an upper bound of the steps whose
  gradients were thrown away).
- join: a new worker starts with --join (it is not in the cluster spec).
  Reported: seconds from its start to its first step (asynchronous: its
  first gradient applied; synchronous: the first global step its gradient
  took part in, or was dropped from as stale).

Then the chief is sent SIGTERM and every process must exit 0.

    bench/elastic_timing.py [--build build] [--modes async,sync] [--reps 3] [--heartbeat_timeout_secs 2]

Only 127.0.0.1 is used. Prints a Markdown table (medians, and the range
over the repetitions) for docs/ROBUSTNESS.md.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import ports  # noqa: E402

STEP = re.compile(r"Worker : (\d+), Step: (\d+),")


class Task:
    """One process; its output lines are kept with the time each arrived."""

    def __init__(self, args, log):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines = []  # (monotonic time, line)
        self.lock = threading.Lock()
        self.log = log
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log, "w") as log:
            for line in self.proc.stdout:
                with self.lock:
                    self.lines.append((time.monotonic(), line))
                log.write(line)

    def steps(self, after=0.0):
        """(time, global step) of this task's step lines that arrived after `after`."""
        with self.lock:
            return [(t, int(m.group(2))) for t, line in self.lines if t > after
                    for m in [STEP.search(line)] if m]

    def wait_for(self, pred, timeout):
        """The first (time, line) with pred(line), waiting up to `timeout` s; None then."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            with self.lock:
                lines = self.lines[seen:]
            for t, line in lines:
                if pred(line):
                    return t, line
            seen += len(lines)
            if self.proc.poll() is not None and not self.reader.is_alive():
                return None
            time.sleep(0.02)
        return None

    def text(self):
        with self.lock:
            return "".join(line for _, line in self.lines)


def run_once(build, mode, hb, logs, rep):
    binary = os.path.join(build, "examples", "mnist_distributed")
    ps = f"127.0.0.1:{ports.free_port()}"
    workers = [f"127.0.0.1:{ports.free_port()}" for _ in range(3)]
    spec = f"ps|{ps},worker|" + ";".join(workers)
    common = [binary, "--model=softmax", "--learning_rate=0.003", "--train_steps=100000000", "--print_every=1",
              "--progress=false", f"--heartbeat_timeout_secs={hb}", "--wait_for_workers_secs=30",
              "--stop_grace_secs=60", "--intra_op_threads=1"]
    if mode == "sync":
        common += ["--sync_replicas", "--sync_step_timeout_secs=60"]
    tasks = {}

    def start(name, extra):
        tasks[name] = Task(common + extra, os.path.join(logs, f"{mode}{rep}_{name}.log"))
        return tasks[name]

    try:
        start("ps", [f"--cluster_spec={spec}", "--job_name=ps", "--task_index=0"])
        elastic = ["--elastic"] if mode == "sync" else []
        chief = start("w0", [f"--cluster_spec={spec}", "--job_name=worker", "--task_index=0", *elastic])
        for i in (1, 2):
            start(f"w{i}", [f"--cluster_spec={spec}", "--job_name=worker", f"--task_index={i}", *elastic])
        if chief.wait_for(lambda s: (m := STEP.search(s)) and int(m.group(2)) >= 100, 600) is None:
            raise RuntimeError(f"{mode}: the job did not reach global step 100:\n{chief.text()}")
        # Leave: worker 2's machine vanishes.
        killed_at = time.monotonic()
        tasks["w2"].proc.send_signal(signal.SIGKILL)
        steps_before = [(t, s) for t, s in chief.steps() if t <= killed_at]
        before = [s for _, s in steps_before]
        last_before = max(before) if before else 0
        # The usual pause between global steps, over the 20 before the kill.
        recent = [t for t, _ in steps_before[-21:]]
        usual = statistics.median(b - a for a, b in zip(recent, recent[1:])) if len(recent) > 1 else None
        if chief.wait_for(lambda s: (m := STEP.search(s)) and int(m.group(2)) > last_before, 300) is None:
            raise RuntimeError(f"{mode}: no global step after the kill:\n{chief.text()}")
        after = chief.steps(killed_at)
        next_step = next(t for t, s in after if s > last_before)
        leave = next_step - killed_at
        # The stall: the longest pause between global steps until 20 more
        # have been applied (the step in flight may complete at once with the
        # dead worker's gradient; the next one waits for its declaration).
        if chief.wait_for(lambda s: (m := STEP.search(s)) and int(m.group(2)) > last_before + 20, 300) is None:
            raise RuntimeError(f"{mode}: the job did not go on after the kill:\n{chief.text()}")
        times = [killed_at] + [t for t, s in chief.steps(killed_at) if s <= last_before + 20]
        stall = max(b - a for a, b in zip(times, times[1:]))
        redone = max(0, last_before - min(s for _, s in after) + 1) if after else 0
        # Join: a worker that is not in the spec joins the running job.
        join_cmd = [f"--join={ps}", f"--join_as=127.0.0.1:{ports.free_port()}"]
        joiner = start("joiner", join_cmd)
        first = joiner.wait_for(lambda s: STEP.search(s) is not None, 300)
        if first is None:
            raise RuntimeError(f"{mode}: the joiner never stepped:\n{joiner.text()}\n--- chief:\n{chief.text()}")
        join = first[0] - joiner.started
        # The end: the chief is told to stop; everyone leaves after a step.
        chief.proc.send_signal(signal.SIGTERM)
        codes = {}
        for name, t in tasks.items():
            if name == "w2":
                continue
            try:
                codes[name] = t.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                codes[name] = None
        for t in tasks.values():
            t.reader.join(timeout=10)
        text = chief.text()
        if "recreating the session" in text:
            redone = max(redone, 1)
        dropped = re.search(r"(\d+) stale gradients dropped", text)
        per_step = re.search(r"the last step aggregated (\d+)", text)
        lost_sync = None
        if mode == "sync" and dropped:
            lost_sync = int(dropped.group(1)) / max(1, int(per_step.group(1)) if per_step else 3)
        return {"leave": leave, "stall": stall, "usual": usual, "join": join, "redone": redone, "lost_sync": lost_sync, "codes": codes}
    finally:
        for t in tasks.values():
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait()


def summary(values, spec):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = format(statistics.median(values), spec)
    return med if len(values) == 1 else f"{med} ({format(min(values), spec)}–{format(max(values), spec)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--modes", default="async,sync")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--heartbeat_timeout_secs", type=float, default=2)
    args = ap.parse_args()
    logs = tempfile.mkdtemp(prefix="elastic_timing_")
    print(f"heartbeat timeout {args.heartbeat_timeout_secs} s; medians (range) of {args.reps} runs\n")
    print("| training | death → next global step (s) | longest pause after the death (s) | usual pause (s) | "
          "global steps redone per leave | "
          "sync steps dropped (upper bound) | join start → first step (s) | all exited 0 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    failed = False
    for mode in args.modes.split(","):
        runs = [run_once(args.build, mode, args.heartbeat_timeout_secs, logs, r) for r in range(args.reps)]
        ok = all(c == 0 for r in runs for c in r["codes"].values())
        failed |= not ok
        bad = "" if ok else " (" + "; ".join(str(r["codes"]) for r in runs) + ")"
        print(f"| {mode} | {summary([r['leave'] for r in runs], '.2f')} | {summary([r['stall'] for r in runs], '.2f')} | "
              f"{summary([r['usual'] for r in runs], '.3f')} | "
              f"{summary([r['redone'] for r in runs], 'd')} | "
              f"{summary([r['lost_sync'] for r in runs], '.2f') if mode == 'sync' else 'n/a'} | "
              f"{summary([r['join'] for r in runs], '.1f')} | {'yes' if ok else 'no' + bad} |", flush=True)
    print(f"(logs in {logs})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
