"""The same-host shared-memory option reaches the servers a Python program
and distflow-launch start: tf.train.Server(shared_memory=False) and
distflow-launch --shared_memory=false turn it off, which the task's
/metrics (distflow_bulk_shared_memory) and /status page say; by default it
is on."""
import os
import re
import subprocess
import sys
import textwrap
import urllib.request

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402  (ports named before their servers start)
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
TIMEOUT = 120  # generous: a loaded machine is slow, never wrong

import distflow.compat.v1 as tf  # noqa: E402


def shared_memory_gauge(metrics, task):
    """The value of distflow_bulk_shared_memory for `task` in a /metrics text."""
    m = re.search(r'^distflow_bulk_shared_memory\{task="%s"\} (\S+)$' % re.escape(task), metrics, re.M)
    assert m, metrics[-3000:]
    return float(m.group(1))


def fetch(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


@pytest.mark.parametrize("shared_memory", [True, False])
def test_server_option_reaches_the_bulk_port(monkeypatch, shared_memory):
    monkeypatch.delenv("DISTFLOW_SHM", raising=False)
    server = tf.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, status_port=0,
                             shared_memory=shared_memory)
    try:
        assert server.status_port > 0
        task = "/job:worker/replica:0/task:0"
        assert shared_memory_gauge(fetch(server.status_port, "/metrics"), task) == (1.0 if shared_memory else 0.0)
        assert ("shared memory on" if shared_memory else "shared memory off") in fetch(server.status_port, "/status")
    finally:
        server.stop()


def test_server_option_takes_only_a_bool():
    with pytest.raises(TypeError, match=r"shared_memory=\.\.\.\) takes True or False, not 'no'"):
        tf.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, shared_memory="no")


# The worker reads the ps's /metrics (the ps's status port is the first of
# --status_base_port) and its own DISTFLOW_SHM, then ends the cluster.
WORKER = textwrap.dedent("""
    import json, os, sys, time, urllib.error, urllib.request
    from distflow import _distflow
    own = [int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--status_port=")][0]
    # The launcher starts every task at once: the ps may not serve yet.
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{own - 1}/metrics", timeout=60) as r:
                metrics = r.read().decode()
            break
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    line = [ln for ln in metrics.splitlines() if ln.startswith("distflow_bulk_shared_memory{")]
    print("ps gauge", line, "env", os.environ.get("DISTFLOW_SHM"), flush=True)
    cluster = json.loads(os.environ["DISTFLOW_CONFIG"])["cluster"]
    _distflow.shutdown_cluster(cluster, "the test is done", except_tasks=[])
""")


@pytest.mark.parametrize("flag,gauge,env", [(None, "1", "None"), ("--shared_memory=false", "0", "0")])
def test_launcher_forwards_shared_memory_off(tmp_path, monkeypatch, flag, gauge, env):
    monkeypatch.delenv("DISTFLOW_SHM", raising=False)
    monkeypatch.delenv("DISTFLOW_CONFIG", raising=False)
    program = tmp_path / "worker.py"
    program.write_text(WORKER)
    # The ps program: the real distflow-server behind a script (of the same
    # name) that first says which flags it was given.
    ps = tmp_path / "distflow-server"
    ps.write_text(f'#!/bin/sh\necho "ps flags: $*"\nexec {os.path.join(BUILD, "tools", "distflow-server")} "$@"\n')
    ps.chmod(0o755)
    args = [LAUNCH, "--ps", "1", "--workers", "1", "--status_base_port", str(free_port()), "--ps_program", str(ps)]
    if flag:
        args.append(flag)
    r = subprocess.run(args + ["--", sys.executable, str(program)], capture_output=True, text=True,
                       timeout=TIMEOUT)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    flags = [ln for ln in out.splitlines() if ln.startswith("[ps:0] ps flags: ")]
    assert flags, out[-4000:]
    assert ("--shared_memory=false" in flags[0]) == bool(flag), flags[0]
    found = [ln for ln in out.splitlines() if ln.startswith("[worker:0] ps gauge")]
    assert found, out[-4000:]
    assert f' {gauge}\']' in found[0] and found[0].endswith(f"env {env}"), found[0]
