"""Elastic synchronous training from Python with real processes: a ps, two
workers of the spec and a worker that joins the job through its
coordinator (distflow.elastic), each running examples/python/elastic_sync_mnist.py
with SyncReplicasOptimizer(elastic=True)."""
import os
import re
import subprocess
import sys
import threading
import time

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402  (ports named before their servers start)

import distflow.compat.v1 as tf  # noqa: E402
from distflow import _distflow, elastic  # noqa: E402

PROGRAM = os.path.join(SOURCE, "examples", "python", "elastic_sync_mnist.py")


class Task:
    """A process of the program whose output a thread collects as it comes."""

    def __init__(self, args, cwd):
        self.proc = subprocess.Popen([sys.executable, PROGRAM] + args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self._lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self._lines.append(line)

    def output(self):
        return "".join(self._lines)

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"no line with {text!r} within {timeout} s:\n" + self.output()[-3000:])

    def wait(self, timeout):
        """The exit status (None: killed after `timeout` s)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(timeout=10)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_sync_replicas_follow_a_worker_that_joins_and_leaves(tmp_path):
    # The joiner joins before the spec's workers start (the ps, its
    # coordinator, is up), so it takes part whatever the machine's load:
    # the chief aggregates 3 gradients per step while it is in the job, and
    # 2 once it has left after its 20 steps. Nobody restarts.
    ps_port, w0_port, w1_port, joiner_port = (free_port() for _ in range(4))
    common = [f"--ps_hosts=127.0.0.1:{ps_port}", f"--worker_hosts=127.0.0.1:{w0_port},127.0.0.1:{w1_port}",
              "--train_steps=120", f"--logdir={tmp_path / 'log'}"]
    tasks = []
    try:
        ps = Task(common + ["--job_name=ps", "--task_index=0"], tmp_path)
        tasks.append(ps)
        joiner = Task([f"--join=127.0.0.1:{ps_port}", f"--join_as=127.0.0.1:{joiner_port}", "--local_steps=20"],
                      tmp_path)
        tasks.append(joiner)
        joiner.wait_for("Joined the running job as worker", 120)
        chief = Task(common + ["--job_name=worker", "--task_index=0"], tmp_path)
        w1 = Task(common + ["--job_name=worker", "--task_index=1"], tmp_path)
        tasks += [chief, w1]
        deadline = time.monotonic() + 300
        codes = {name: t.wait(max(1.0, deadline - time.monotonic()))
                 for name, t in (("chief", chief), ("worker 1", w1), ("joiner", joiner), ("ps", ps))}
    finally:
        for t in tasks:
            t.kill()
    chief_out, w1_out, joiner_out, ps_out = (t.output() for t in (chief, w1, joiner, ps))
    for name, t in (("chief", chief), ("worker 1", w1), ("joiner", joiner), ("ps", ps)):
        assert codes[name] == 0, f"{name} exited {codes[name]}:\n{t.output()[-3000:]}"
    assert "Joined the running job as worker 2" in joiner_out, joiner_out[-3000:]
    # The joiner ran its 20 steps synchronously with the others and left.
    assert re.search(r"Worker 2: 20 local steps", joiner_out), joiner_out[-3000:]
    assert "/job:worker/replica:0/task:2 joined the job from 127.0.0.1:" in ps_out, ps_out[-3000:]
    assert "/job:worker/replica:0/task:2 left the cluster" in ps_out, ps_out[-3000:]
    assert "declared dead" not in ps_out, ps_out[-3000:]
    # The count followed the membership: 3 gradients per step with the
    # joiner in the job, then 2 from a later global step on, to the end.
    three = chief_out.find("aggregating 3 gradients per step")
    assert three >= 0, chief_out[-3000:]
    two = re.search(r"aggregating 2 gradients per step from global step (\d+)", chief_out[three:])
    assert two and int(two.group(1)) >= 20, chief_out[-3000:]
    m = re.search(r"Chief: (\d+) synchronous steps applied; the gradients per step changed (\d+) times, the last "
                  r"step aggregated (\d+)", chief_out)
    assert m, chief_out[-3000:]
    assert int(m.group(1)) == 120 and int(m.group(2)) >= 1 and int(m.group(3)) == 2, m.group(0)
    # The chief waited for the joined worker too before ending the cluster.
    assert "Supervisor: 1 worker(s) joined the running job" in chief_out, chief_out[-3000:]
    assert "Supervisor: 3 of 3 workers done" in chief_out, chief_out[-3000:]
    for out in (chief_out, w1_out, joiner_out):
        assert "recreating the session" not in out.lower(), out[-3000:]
    for w, out in ((0, chief_out), (1, w1_out)):
        acc = re.search(rf"Worker {w}: \d+ local steps, loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+)", out)
        assert acc, out[-3000:]
        assert float(acc.group(2)) < float(acc.group(1)) and float(acc.group(3)) > 0.5, acc.group(0)


def test_elastic_needs_a_worker_server_with_a_ps_job():
    # Outside a worker process there is no coordinator to follow; the error says where it is looked for.
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"elastic=True\) follows the membership kept by the job's coordinator"):
            tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
                                           replica_id=0, elastic=True)
        with pytest.raises(ValueError, match=r"min_replicas=\.\.\.\) bounds elastic training; add elastic=True"):
            tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
                                           replica_id=0, min_replicas=2)


def test_join_cluster_names_a_bad_address_and_a_task_that_is_not_the_coordinator():
    with pytest.raises(_distflow.InvalidArgumentError, match="the coordinator's address 'nonsense'"):
        elastic.join_cluster("nonsense", "127.0.0.1:1")
    # A worker of a job with a ps keeps no membership (ps 0 does; it is not started here).
    server = tf.train.Server({"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]},
                             job_name="worker", task_index=0)
    try:
        address = server.target.replace("grpc://", "")
        with pytest.raises(_distflow.FailedPreconditionError, match="keeps no membership"):
            elastic.cluster_members(address)
    finally:
        server.stop()
