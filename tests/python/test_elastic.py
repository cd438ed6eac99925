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

    def __init__(self, args, cwd, program=PROGRAM):
        self.proc = subprocess.Popen([sys.executable, program] + args, stdout=subprocess.PIPE,
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
    # The data followed the membership too (distflow.elastic.worker_shard):
    # the joiner took the third shard of three; once it had left, the two
    # spec workers took halves.
    assert "Worker 2: training on shard 2 of 3" in joiner_out, joiner_out[-3000:]
    for w, out in ((0, chief_out), (1, w1_out)):
        assert f"Worker {w}: training on shard {w} of 3" in out, out[-3000:]
        assert f"Worker {w}: training on shard {w} of 2" in out, out[-3000:]
    for w, out in ((0, chief_out), (1, w1_out)):
        acc = re.search(rf"Worker {w}: \d+ local steps, loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+)", out)
        assert acc, out[-3000:]
        assert float(acc.group(2)) < float(acc.group(1)) and float(acc.group(3)) > 0.5, acc.group(0)


def wait_until(condition, timeout, describe):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s:\n" + describe()[-3000:]
        time.sleep(0.1)


# A worker that prints its shard (distflow.elastic.worker_shard) whenever it
# changes, until its stop file exists; then it leaves the job.
SHARD_WORKER = r"""
import os, sys, time
import distflow.compat.v1 as tf
from distflow import elastic
coordinator, workers, task, join_as, stop_file = sys.argv[1:6]
task = int(task)
if join_as:
    task, cluster = elastic.join_cluster(coordinator, join_as)
else:
    cluster = tf.train.ClusterSpec({"ps": [coordinator], "worker": workers.split(",")})
server = tf.train.Server(cluster, job_name="worker", task_index=task)
last = None
while not os.path.exists(stop_file):
    shard = elastic.worker_shard(coordinator, task)
    if shard != last:
        print("worker %d: shard %d of %d" % (task, shard[0], shard[1]), flush=True)
        last = shard
    time.sleep(0.05)
server.stop()
print("worker %d left" % task, flush=True)
"""


def test_worker_shards_follow_a_join_and_a_leave_and_cover_the_data(tmp_path):
    # ps 0 (the coordinator) in this process, two spec workers and a joiner
    # as processes. With the joiner in, the three take shards 0, 1 and 2 of
    # 3; once it has left, the two take 0 and 1 of 2. Each time the shards
    # of 1,000 examples are disjoint and cover them.
    ps_port, w0_port, w1_port, joiner_port = (free_port() for _ in range(4))
    coordinator = f"127.0.0.1:{ps_port}"
    workers = f"127.0.0.1:{w0_port},127.0.0.1:{w1_port}"
    ps = tf.train.Server({"ps": [coordinator], "worker": workers.split(",")}, job_name="ps", task_index=0)
    program = tmp_path / "shard_worker.py"
    program.write_text(SHARD_WORKER)
    stop = {name: str(tmp_path / f"stop_{name}") for name in ("w0", "w1", "joiner")}
    tasks = {}
    try:
        tasks["w0"] = Task([coordinator, workers, "0", "", stop["w0"]], tmp_path, str(program))
        tasks["w1"] = Task([coordinator, workers, "1", "", stop["w1"]], tmp_path, str(program))
        tasks["joiner"] = Task([coordinator, workers, "-1", f"127.0.0.1:{joiner_port}", stop["joiner"]], tmp_path,
                               str(program))
        for name, t in tasks.items():
            t.wait_for(" of 3\n", 120)

        def shards(count, since=None):
            found = {}
            for name, t in tasks.items():
                out = t.output()[(since or {}).get(name, 0):]
                lines = re.findall(rf"worker (\d+): shard (\d+) of {count}\n", out)
                if lines:
                    found[name] = (int(lines[-1][0]), int(lines[-1][1]))
            return found

        def assert_cover(found, count):
            data = list(range(1000))
            parts = [set(data[index::count]) for _, index in found.values()]
            assert sorted(index for _, index in found.values()) == list(range(count)), found
            assert set().union(*parts) == set(data), found
            assert sum(len(p) for p in parts) == len(data), found  # disjoint

        three = shards(3)
        assert set(three) == {"w0", "w1", "joiner"}, three
        assert three["joiner"] == (2, 2), three  # the joiner is task 2, the last by task index
        assert_cover(three, 3)
        # (A spec worker may have printed "of 2" before the join: only what comes after counts.)
        since = {name: len(t.output()) for name, t in tasks.items()}
        open(stop["joiner"], "w").close()
        assert tasks["joiner"].wait(60) == 0, tasks["joiner"].output()[-3000:]
        for name in ("w0", "w1"):
            wait_until(lambda: shards(2, since).get(name), 60, tasks[name].output)
        two = shards(2, since)
        assert set(two) == {"w0", "w1"}, two
        assert_cover(two, 2)
        # The coordinator recorded the leave; the joiner's shard query names it once it is gone.
        members = {m.task: m.state for m in elastic.cluster_members(coordinator)}
        assert members["/job:worker/replica:0/task:2"] == "LEFT", members
        with pytest.raises(_distflow.NotFoundError, match=r"does not hold /job:worker/replica:0/task:2 as live"):
            elastic.worker_shard(coordinator, 2)
        for name in ("w0", "w1"):
            open(stop[name], "w").close()
            assert tasks[name].wait(60) == 0, tasks[name].output()[-3000:]
    finally:
        for t in tasks.values():
            t.kill()
        ps.stop()


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


LAUNCHER_JOINER = r"""
import argparse, sys
import distflow.compat.v1 as tf
from distflow import elastic
# argparse's default abbreviations would take a --join=... flag for --join-marker.
parser = argparse.ArgumentParser()
parser.add_argument("--join-marker", default="none")
args, rest = parser.parse_known_args()
print("marker", args.join_marker, "argv", sys.argv[1:], flush=True)
join = elastic.launcher_join()
if join:
    task_index, cluster = elastic.join_cluster(*join)
    server = tf.train.Server(cluster, job_name="worker", task_index=task_index)
    print("joined as worker", task_index, "on", join[1], flush=True)
    server.stop()
"""


def test_a_worker_the_launcher_starts_to_join_a_ps_job_is_told_in_its_environment(tmp_path):
    """distflow-launch --ps 1 --min_workers 1 --max_workers 2: the joiner
    gets DISTFLOW_JOIN/DISTFLOW_JOIN_AS, nothing in its argv that the
    program's own argparse could take, and joins through ps 0."""
    build = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
    program = tmp_path / "joiner.py"
    program.write_text(LAUNCHER_JOINER)
    env = dict(os.environ)
    for name in ("DISTFLOW_CONFIG", "DISTFLOW_JOIN", "DISTFLOW_JOIN_AS"):
        env.pop(name, None)
    r = subprocess.run([os.path.join(build, "tools", "distflow-launch"), "--ps", "1", "--min_workers", "1",
                        "--max_workers", "2", "--ps_exit_secs", "2", "--", sys.executable, str(program)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=240)
    out = r.stdout
    assert r.returncode == 0, out[-4000:]
    assert "[worker:+1] marker none argv []" in out, out[-4000:]
    assert re.search(r"\[worker:\+1\] joined as worker 1 on 127\.0\.0\.1:\d+", out), out[-4000:]
    # The spec's worker has its task in its flags, as before.
    assert re.search(r"\[worker:0\] marker none argv \['--job_name=worker', '--task_index=0', '--cluster_spec=", out), \
        out[-4000:]


def test_launcher_join_needs_both_variables(monkeypatch):
    for name in ("DISTFLOW_JOIN", "DISTFLOW_JOIN_AS"):
        monkeypatch.delenv(name, raising=False)
    assert elastic.launcher_join() is None
    monkeypatch.setenv("DISTFLOW_JOIN", "10.0.0.1:2222")
    with pytest.raises(ValueError, match="DISTFLOW_JOIN_AS=''.*needs both"):
        elastic.launcher_join()
    monkeypatch.setenv("DISTFLOW_JOIN_AS", "10.0.0.2:2300")
    assert elastic.launcher_join() == ("10.0.0.1:2222", "10.0.0.2:2300")
