"""The seeds' Python programs under examples/python, run as their users ran
them: real processes, a real distflow-server (the C++ binary) as the
cluster, only the address changed to a free port."""
import contextlib
import json
import os
import re
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402  (ports named before their servers start)
SERVER = os.path.join(BUILD, "tools", "distflow-server")


def run_program(name, replacements, timeout=60):
    """Runs examples/python/<name> with its text's addresses replaced."""
    with open(os.path.join(SOURCE, "examples", "python", name)) as f:
        text = f.read()
    for old, new in replacements.items():
        assert old in text, f"{name} no longer mentions {old}"
        text = text.replace(old, new)
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=timeout, env=env)


def run_tasks(command, tasks, cwd, what, timeout=400):
    """Starts one process per (job, index) of `tasks`, each `command` plus
    --job_name/--task_index, and waits for all of them. Returns their outputs;
    fails with every task's tail if one exits non-zero or they take longer
    than `timeout` seconds."""
    procs = [subprocess.Popen(command + [f"--job_name={job}", f"--task_index={i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
             for job, i in tasks]
    outputs = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outputs.append(out)
    except subprocess.TimeoutExpired:
        # Every task's output, to see which one did not finish and why.
        for p in procs:
            if p.poll() is None:
                p.kill()
        tails = []
        for k, ((job, i), p) in enumerate(zip(tasks, procs)):
            out = outputs[k] if k < len(outputs) else p.communicate()[0]
            tails.append(f"--- {job}:{i} (exit {p.returncode}) ---\n{(out or '')[-2500:]}")
        raise AssertionError(f"{what} did not finish within {timeout} s:\n" + "\n".join(tails))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for (job, i), p, out in zip(tasks, procs, outputs):
        assert p.returncode == 0, f"{what}: {job}:{i} exited {p.returncode}:\n{out[-3000:]}"
    return outputs


@contextlib.contextmanager
def cpp_servers(spec, tasks):
    """distflow-server processes for `tasks` ((job, index) pairs) of the JSON
    cluster `spec`; on exit each gets SIGTERM. Yields a list that then holds
    the tasks that had to be killed (they did not stop within 15 s)."""
    servers = [subprocess.Popen([SERVER, f"--cluster_spec={spec}", f"--job_name={job}", f"--task_index={i}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for job, i in tasks]
    killed = []
    try:
        yield killed
    finally:
        for s in servers:
            s.terminate()
        for task, s in zip(tasks, servers):
            try:
                s.wait(timeout=15)
            except subprocess.TimeoutExpired:
                s.kill()
                killed.append(task)


@pytest.fixture
def one_task_server():
    port = free_port()
    proc = subprocess.Popen([SERVER, f"--cluster_spec=local|127.0.0.1:{port}", "--job_name=local",
                             "--task_index=0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield port
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("distflow-server did not stop on SIGTERM")


def test_hello_distributed_against_a_cpp_server(one_task_server):
    out = run_program("hello_distributed.py", {"localhost:2222": f"127.0.0.1:{one_task_server}"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "b'Hello, distributed TensorFlow!'"


def test_a_session_whose_server_is_not_up_says_so_at_once():
    # The session waits for a server that is still starting (clusters start
    # in any order), but says at once that nothing listens there.
    port = free_port()
    with open(os.path.join(SOURCE, "examples", "python", "hello_distributed.py")) as f:
        text = f.read().replace("localhost:2222", f"127.0.0.1:{port}")
    proc = subprocess.Popen([sys.executable, "-c", text], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        start = time.monotonic()
        line = proc.stderr.readline()
        assert time.monotonic() - start < 10
        assert f"127.0.0.1:{port}" in line and "connection refused" in line, line
        assert "waiting up to" in line, line
    finally:
        proc.kill()
        proc.wait()


def test_book_distributed_example_trains_on_one_ps_and_three_workers(tmp_path):
    # The book's chapter 9 program as the book runs it: four processes, one
    # per task. A short run (300 global steps) must learn; every process,
    # the ps included, must exit by itself.
    ports = [free_port() for _ in range(4)]
    replacements = {"localhost:2222": f"127.0.0.1:{ports[0]}", "localhost:2223": f"127.0.0.1:{ports[1]}",
                    "localhost:2224": f"127.0.0.1:{ports[2]}", "localhost:2225": f"127.0.0.1:{ports[3]}",
                    "TRAINING_STEPS = 5000": "TRAINING_STEPS = 300", "\"/tmp/log\"": repr(str(tmp_path / "log"))}
    with open(os.path.join(SOURCE, "examples", "python", "distribute.py")) as f:
        text = f.read()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    program = tmp_path / "distribute.py"
    program.write_text(text)
    tasks = [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]
    outputs = run_tasks([sys.executable, str(program)], tasks, tmp_path, "the book's cluster")
    chief = outputs[1]
    steps = [float(m) for m in re.findall(r"Worker : \d, Step: ([0-9.]+), Accuracy", "".join(outputs[1:]))]
    assert steps, chief[-3000:]
    test_acc = [float(m) for m in re.findall(r"Test-Accuracy: ([0-9.]+)", "".join(outputs[1:]))]
    assert len(test_acc) == 3, "".join(outputs)[-3000:]
    # Ten Fashion-MNIST classes: chance is 0.1; 300 Adam steps of the CNN reach well above.
    assert min(test_acc) > 0.5, test_acc
    assert "shutting the cluster down" in chief


def test_sync_replicas_trains_in_lockstep_on_one_ps_and_two_workers(tmp_path):
    # tf.train.SyncReplicasOptimizer under MonitoredTrainingSession: every
    # global step averages one gradient from each worker, so each worker runs
    # as many local steps as the global step counts, and the chief's
    # optimizer applied exactly that many updates.
    ports = [free_port() for _ in range(3)]
    steps = 60
    command = [sys.executable, os.path.join(SOURCE, "examples", "python", "sync_mnist.py"),
               f"--ps_hosts=127.0.0.1:{ports[0]}", f"--worker_hosts=127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}",
               f"--train_steps={steps}", f"--logdir={tmp_path / 'log'}"]
    tasks = [("ps", 0), ("worker", 0), ("worker", 1)]
    outputs = run_tasks(command, tasks, tmp_path, "the synchronous cluster", timeout=300)
    for w in (0, 1):
        out = outputs[1 + w]
        m = re.search(rf"Worker {w}: (\d+) local steps, loss ([0-9.]+) -> ([0-9.]+), test accuracy ([0-9.]+)", out)
        assert m, out[-3000:]
        local, first, last, acc = int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))
        # A worker may see the stop one step early or late around the last
        # global step, never more.
        assert abs(local - steps) <= 1, out[-3000:]
        assert last < first, out[-3000:]
        assert acc > 0.5, out[-3000:]
    chief = outputs[1]
    assert f"Chief: {steps} synchronous steps applied" in chief, chief[-3000:]
    assert (tmp_path / "log" / "checkpoint").exists()


def test_placement_program_as_a_client_of_cpp_servers(tmp_path):
    # Two C++ ps tasks and a C++ worker 7; the Python program only builds the
    # graph and runs it through worker 7's master.
    ports = [free_port() for _ in range(3)]
    spec = json.dumps({"ps": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"],
                       "worker": {"7": f"127.0.0.1:{ports[2]}"}})
    with cpp_servers(spec, [("ps", 0), ("ps", 1), ("worker", 7)]) as killed:
        out = run_program("ps_worker_placement.py", {"worker7:2222": f"127.0.0.1:{ports[2]}",
                                                     "range(10000)": "range(100)"}, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        before = float(re.search(r"loss before: ([0-9.]+)", out.stdout).group(1))
        after = float(re.search(r"loss after: ([0-9.]+)", out.stdout).group(1))
        assert after < before, out.stdout
    assert not killed, f"distflow-server {killed} did not stop on SIGTERM"


INTEROP_PROGRAM = """
import sys
import numpy as np
import distflow.compat.v1 as tf

# The model of examples/ps_worker_placement.cc, by the same variable names,
# on worker 1; its variables already live on the ps tasks.
with tf.device("/job:ps/task:0"):
    w1 = tf.Variable(tf.zeros([4, 16]), name="weights_1")
    b1 = tf.Variable(tf.zeros([16]), name="biases_1")
with tf.device("/job:ps/task:1"):
    w2 = tf.Variable(tf.zeros([16, 1]), name="weights_2")
    b2 = tf.Variable(tf.zeros([1]), name="biases_2")
with tf.device("/job:worker/task:1"):
    x = tf.placeholder(tf.float32, [None, 4])
    y = tf.placeholder(tf.float32, [None, 1])
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.square(logits - y))
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)

rng = np.random.RandomState(7)
def batch():
    xs = rng.uniform(-1, 1, (32, 4)).astype(np.float32)
    return xs, xs.sum(axis=1, keepdims=True)

def train_100_steps(sess):
    xs, ys = batch()
    print("python loss before", sess.run(loss, feed_dict={x: xs, y: ys}))
    for _ in range(100):
        xs, ys = batch()
        sess.run(train, feed_dict={x: xs, y: ys})
    xs, ys = batch()
    print("python loss after", sess.run(loss, feed_dict={x: xs, y: ys}))

with tf.Session(sys.argv[1]) as sess:   # no initializer: the C++ worker's values are used
    w2_before = sess.run(w2)
    train_100_steps(sess)
    print("weights_2 change", float(np.abs(sess.run(w2) - w2_before).sum()))
"""


@contextlib.contextmanager
def placement_cluster():
    """C++ servers for 2 ps + 2 workers. Yields the C++ placement program's
    command line for `steps` steps through worker 0, and worker 1's target."""
    ports = [free_port() for _ in range(4)]
    spec = json.dumps({"ps": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"],
                       "worker": [f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[3]}"]})
    with cpp_servers(spec, [("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]):
        def cpp_worker(steps):
            return [os.path.join(BUILD, "examples", "ps_worker_placement"), f"--target=grpc://127.0.0.1:{ports[2]}",
                    "--worker_task=0", f"--steps={steps}"]
        yield cpp_worker, f"grpc://127.0.0.1:{ports[3]}"


def test_a_python_worker_and_a_cpp_worker_train_one_model(tmp_path):
    # C++ servers for 2 ps + 2 workers. The C++ program trains the seeds'
    # placement model through worker 0; then a Python client of worker 1
    # finds the trained variables on the ps tasks (a low loss without
    # initialising anything) and trains them further.
    with placement_cluster() as (cpp_worker, python_target):
        cpp = subprocess.run(cpp_worker(300), capture_output=True, text=True, timeout=120)
        assert cpp.returncode == 0, cpp.stdout + cpp.stderr[-2000:]
        m = re.search(r"loss went from ([0-9.]+) to ([0-9.]+)", cpp.stdout)
        cpp_first, cpp_last = float(m.group(1)), float(m.group(2))
        program = tmp_path / "interop.py"
        program.write_text(INTEROP_PROGRAM)
        py = subprocess.run([sys.executable, str(program), python_target], capture_output=True, text=True,
                            timeout=120)
        assert py.returncode == 0, py.stderr[-3000:]
        before = float(re.search(r"python loss before ([0-9.e-]+)", py.stdout).group(1))
        after = float(re.search(r"python loss after ([0-9.e-]+)", py.stdout).group(1))
        change = float(re.search(r"weights_2 change ([0-9.e-]+)", py.stdout).group(1))
        # Variables the Python graph had initialised itself (zeros) would
        # give the loss of predicting 0, about 1.3 for these sums; the
        # C++-trained ones give about the C++ worker's last loss.
        assert before < 0.1 * cpp_first and before < 1.0, (cpp.stdout, py.stdout)
        assert before < 4 * cpp_last + 0.05, (cpp.stdout, py.stdout)
        assert change > 0, py.stdout
        assert after < 2 * before, py.stdout


CONCURRENT_PROGRAM = INTEROP_PROGRAM.split("with tf.Session(sys.argv[1])")[0] + """
import time
with tf.Session(sys.argv[1]) as sess:
    # The C++ worker initialises the variables; wait for that, not for a time.
    deadline = time.monotonic() + 60
    while True:
        try:
            seen = sess.run(w2)
            break
        except tf.errors.FailedPreconditionError:
            assert time.monotonic() < deadline, "the C++ worker never initialised the variables"
            time.sleep(0.05)
    # Without a step of ours, the variables move: the other worker is training.
    while True:
        now = sess.run(w2)
        if not np.array_equal(now, seen):
            print("moved by the other worker", flush=True)
            break
        assert time.monotonic() < deadline, "the variables never moved without us"
        time.sleep(0.01)
    train_100_steps(sess)
"""


def test_a_python_worker_and_a_cpp_worker_train_one_model_at_the_same_time(tmp_path):
    # The C++ worker trains without end through worker 0; the Python worker,
    # through worker 1, sees the shared variables move between two of its
    # reads (the C++ updates), then trains them too. The C++ worker is still
    # running when Python is done (its steps have no end), and is stopped.
    with placement_cluster() as (cpp_worker, python_target):
        cpp = subprocess.Popen(cpp_worker(100000000), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            program = tmp_path / "concurrent.py"
            program.write_text(CONCURRENT_PROGRAM)
            py = subprocess.run([sys.executable, str(program), python_target], capture_output=True, text=True,
                                timeout=180)
            assert cpp.poll() is None, f"the C++ worker stopped early:\n{cpp.stderr.read()[-3000:]}"
        finally:
            cpp.terminate()
            cpp.wait(timeout=30)
        assert py.returncode == 0, py.stderr[-3000:]
        assert "moved by the other worker" in py.stdout, py.stdout
        before = float(re.search(r"python loss before ([0-9.e-]+)", py.stdout).group(1))
        after = float(re.search(r"python loss after ([0-9.e-]+)", py.stdout).group(1))
        assert after < before or after < 0.05, py.stdout


def test_a_huge_allocation_is_refused_and_the_server_keeps_serving():
    # One Fill of 1e9 floats (4 GB) from any client used to take that much of
    # a server's memory. A step's outputs may now hold at most --max_step_bytes
    # on a task (by default an eighth of the machine's memory; 1 GiB here).
    port = free_port()
    server = subprocess.Popen([SERVER, f"--cluster_spec=local|127.0.0.1:{port}", "--job_name=local",
                               "--task_index=0", "--max_step_bytes=1073741824"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    script = f"""
import distflow.compat.v1 as tf
huge = tf.zeros([1000000000], name="huge")
small = tf.zeros([10], name="small")
with tf.Session("grpc://127.0.0.1:{port}") as sess:
    try:
        sess.run(huge)
        print("NOT REFUSED")
    except tf.errors.ResourceExhaustedError as e:
        print("REFUSED:", e)
    print("SMALL:", sess.run(small).shape)
"""
    try:
        client = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert client.returncode == 0, client.stdout + client.stderr
        assert "REFUSED:" in client.stdout and "--max_step_bytes" in client.stdout, client.stdout
        assert "SMALL: (10,)" in client.stdout, client.stdout
        with open(f"/proc/{server.pid}/status") as f:
            peak_kb = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))
        assert peak_kb < 1024 * 1024, f"the server's memory peaked at {peak_kb} kB"
    finally:
        server.terminate()
        server.wait(timeout=15)
