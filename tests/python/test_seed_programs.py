"""The seeds' Python programs under examples/python, run as their users ran
them: real processes, a real distflow-server (the C++ binary) as the
cluster, only the address changed to a free port."""
import os
import socket
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
SERVER = os.path.join(BUILD, "tools", "distflow-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_program(name, replacements, timeout=60):
    """Runs examples/python/<name> with its text's addresses replaced."""
    with open(os.path.join(SOURCE, "examples", "python", name)) as f:
        text = f.read()
    for old, new in replacements.items():
        assert old in text, f"{name} no longer mentions {old}"
        text = text.replace(old, new)
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=timeout, env=env)


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
