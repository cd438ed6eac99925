"""SIGTERM to a TF1 program training in a MonitoredTrainingSession
(examples/python/mts_mnist.py, 1 ps + 2 workers as real processes): a
worker finishes its step and leaves the job (counted done, exit 0) while the
chief trains on; then the chief stops after its step, asks the other worker
to stop, saves its last checkpoint, ends the cluster, and every process
exits 0 (the ps's server.join() returns)."""
import os
import re
import signal
import subprocess
import sys
import time

from test_seed_programs import SOURCE, free_port

PROGRAM = os.path.join(SOURCE, "examples", "python", "mts_mnist.py")


def saved_steps(ckpt):
    try:
        state = (ckpt / "checkpoint").read_text()
    except OSError:
        return []
    return [int(n) for n in re.findall(r"model\.ckpt-(\d+)", state)]


def catches_sigterm(proc):
    """Whether the process has a SIGTERM handler now (its session is open:
    before that a SIGTERM would kill it, as it would any program)."""
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def wait_until(cond, timeout, what, procs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s (exit codes {[p.poll() for p in procs]})")


def test_sigterm_stops_workers_and_the_chief_cleanly_with_a_checkpoint(tmp_path):
    ports = [free_port() for _ in range(4)]
    flags = [f"--ps_hosts=127.0.0.1:{ports[0]}",
             f"--worker_hosts=127.0.0.1:{ports[1]},127.0.0.1:{ports[2]},127.0.0.1:{ports[3]}",
             "--last_step=100000000", f"--checkpoint_dir={tmp_path / 'ckpt'}"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs, logs = [], []
    try:
        for job, index in [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]:
            log = open(tmp_path / f"{job}{index}.log", "w+")
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, PROGRAM, *flags, f"--job_name={job}",
                                           f"--task_index={index}"], stdout=log, stderr=subprocess.STDOUT,
                                          cwd=tmp_path, env=env))
        ps, chief, w1, w2 = procs
        text = [lambda i=i: (tmp_path / f"{['ps0', 'worker0', 'worker1', 'worker2'][i]}.log").read_text()
                for i in range(4)]
        # Training is under way once the chief saved a checkpoint (every 50 steps).
        wait_until(lambda: saved_steps(tmp_path / "ckpt"), 300, "no checkpoint", procs)
        # Worker 1 may still be reading its data: its session watches for
        # SIGTERM once it is open (before, SIGTERM kills, as for any program).
        wait_until(lambda: catches_sigterm(w1), 300, "worker 1 never opened its session", procs)
        w1.send_signal(signal.SIGTERM)
        assert w1.wait(timeout=60) == 0, text[2]()
        assert "distflow: SIGTERM: stopping after this step" in text[2](), text[2]()
        assert re.search(r"Worker 1: global steps \d+\.\.\d+", text[2]()), text[2]()
        # The others train on: a later checkpoint comes.
        first = max(saved_steps(tmp_path / "ckpt"))
        wait_until(lambda: max(saved_steps(tmp_path / "ckpt")) > first, 300, "no checkpoint after worker 1 left",
                   [chief, w2, ps])
        chief.send_signal(signal.SIGTERM)
        assert chief.wait(timeout=120) == 0, text[1]()
        assert w2.wait(timeout=60) == 0, text[3]()
        assert ps.wait(timeout=60) == 0, text[0]()
        out = text[1]()
        assert "distflow: SIGTERM: stopping after this step, and every worker after its own" in out, out
        assert "Supervisor: 3 of 3 workers done; shutting the cluster down" in out, out
        m = re.search(r"Worker 0: global steps \d+\.\.(\d+)", out)
        assert m, out
        # The last checkpoint is where the chief stopped.
        assert max(saved_steps(tmp_path / "ckpt")) >= int(m.group(1)), (tmp_path / "ckpt" / "checkpoint").read_text()
        assert "the chief asked every worker to stop; stopping after this step" in text[3](), text[3]()
        assert re.search(r"Worker 2: global steps \d+\.\.\d+", text[3]()), text[3]()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def _cluster(tmp_path, program, extra):
    """1 ps + 2 workers of `program` as real processes, logs in tmp_path."""
    ports = [free_port() for _ in range(3)]
    flags = [f"--ps_hosts=127.0.0.1:{ports[0]}", f"--worker_hosts=127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}",
             "--train_steps=100000000", f"--logdir={tmp_path / 'ckpt'}", *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs, logs = [], []
    for job, index in [("ps", 0), ("worker", 0), ("worker", 1)]:
        log = open(tmp_path / f"{job}{index}.log", "w+")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, program, *flags, f"--job_name={job}", f"--task_index={index}"],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env=env))
    return procs, logs


def _sigterm_the_chief_and_expect_a_clean_end(tmp_path, procs, logs, training=None):
    ps, chief, w1 = procs
    text = {name: (lambda name=name: (tmp_path / f"{name}.log").read_text()) for name in ("ps0", "worker0", "worker1")}
    try:
        # Both workers train (their sessions watch for SIGTERM) and steps are applied.
        wait_until(lambda: catches_sigterm(chief) and catches_sigterm(w1), 300, "the sessions never opened", procs)
        if training is not None:
            wait_until(lambda: re.search(training, text["worker0"]()), 300, "no step", procs)
        chief.send_signal(signal.SIGTERM)
        assert chief.wait(timeout=120) == 0, text["worker0"]()
        assert w1.wait(timeout=60) == 0, text["worker1"]()
        assert ps.wait(timeout=60) == 0, text["ps0"]()
        out = text["worker0"]()
        assert "distflow: SIGTERM: stopping after this step, and every worker after its own" in out, out
        assert "the chief asked every worker to stop; stopping after this step" in text["worker1"](), text["worker1"]()
        assert re.search(r"Supervisor: 2 of 2 workers done; shutting the cluster down", out), out
        # The chief saved a checkpoint on its way out.
        assert saved_steps(tmp_path / "ckpt"), out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def test_sigterm_stops_synchronous_training_cleanly_with_a_checkpoint(tmp_path):
    # SyncReplicasOptimizer under MonitoredTrainingSession: the worker may
    # wait in a step for the chief's gradient; the chief runs its last step
    # again (bounded) so that step completes, then every task exits 0.
    procs, logs = _cluster(tmp_path, os.path.join(SOURCE, "examples", "python", "sync_mnist.py"), [])
    _sigterm_the_chief_and_expect_a_clean_end(tmp_path, procs, logs, r"Worker 0: global step [1-9]\d*")


def test_sigterm_stops_a_supervisor_managed_session_cleanly_with_a_checkpoint(tmp_path):
    # Supervisor.managed_session: no hooks run there; sv.should_stop() turns
    # true after the step in progress.
    procs, logs = _cluster(tmp_path, os.path.join(SOURCE, "examples", "python", "layers_mnist.py"), [])
    _sigterm_the_chief_and_expect_a_clean_end(tmp_path, procs, logs)
