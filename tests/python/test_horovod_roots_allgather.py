"""distflow.horovod.tensorflow with 3 real ranks under distflow-launch --ps 0:
broadcasts from a root other than rank 0 (hvd.broadcast,
hvd.broadcast_global_variables, BroadcastGlobalVariablesHook under
MonitoredTrainingSession) give every rank root k's values, and a root_rank
outside the job is refused naming it and the job's size; hvd.allgather of
tensors whose first dimension differs per rank (0 rows included) equals
NumPy's concatenation, and other dimensions that differ fail naming the
ranks and shapes."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
TIMEOUT = 180  # generous: a loaded machine is slow, never wrong

PROGRAM = textwrap.dedent("""
    import json
    import numpy as np
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    out = {"rank": r}
    bcast = hvd.broadcast(tf.constant([10 * r, 10 * r + 1], dtype=tf.int64), root_rank=2)
    # Variables that differ on every rank; the broadcast gives them rank 1's.
    w = tf.Variable(tf.random_normal([3, 2], seed=7 + r), name="w")
    step = tf.Variable(tf.constant(100 * r, dtype=tf.int64), name="step")
    bcast_vars = hvd.broadcast_global_variables(1)
    rows = [2, 0, 3][r]
    gathered = hvd.allgather(tf.constant(np.arange(rows * 2, dtype=np.float64).reshape(rows, 2) + 100 * r))
    out["gathered_static"] = gathered.shape.as_list()
    mismatched = hvd.allgather(tf.ones([1, 2 + r]))
    errors = []
    for call in (lambda: hvd.broadcast(tf.constant([1.0]), root_rank=n),
                 lambda: hvd.broadcast_global_variables(-1),
                 lambda: hvd.BroadcastGlobalVariablesHook(n + 2).begin()):
        try:
            call()
            errors.append("no error")
        except ValueError as e:
            errors.append(str(e))
    out["errors"] = errors
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out["bcast"] = sess.run(bcast).tolist()
        out["w_before"] = sess.run(w).tolist()
        sess.run(bcast_vars)
        out["w_after"], out["step_after"] = [np.asarray(v).tolist() for v in sess.run([w, step])]
        out["gathered"] = sess.run(gathered).tolist()
        try:
            sess.run(mismatched)
            out["mismatch"] = "no error"
        except tf.errors.OpError as e:
            out["mismatch"] = type(e).__name__ + ": " + str(e)
    # The hook with root 2, in a graph of its own under a monitored session.
    with tf.Graph().as_default():
        v = tf.Variable(tf.constant([float(r), float(r * r)]), name="v")
        with tf.train.MonitoredTrainingSession(hooks=[hvd.BroadcastGlobalVariablesHook(2)]) as mon:
            out["hook"] = mon.run(v).tolist()
    print("RESULT " + json.dumps(out), flush=True)
""")


def run_program(tmp_path, text, workers):
    program = tmp_path / "hvd_program.py"
    program.write_text(text)
    env = dict(os.environ)
    env.pop("DISTFLOW_CONFIG", None)
    r = subprocess.run([LAUNCH, "--ps", "0", "--workers", str(workers), "--", sys.executable, str(program)],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    results = {}
    for line in out.splitlines():
        if "] RESULT " in line:
            got = json.loads(line.split("] RESULT ", 1)[1])
            results[got["rank"]] = got
    assert sorted(results) == list(range(workers)), out[-4000:]
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each rank's RESULT of one run of PROGRAM with 3 ranks."""
    return run_program(tmp_path_factory.mktemp("hvd"), PROGRAM, 3)


def test_broadcasts_from_a_root_other_than_rank_0(results):
    assert results[0]["w_before"] != results[1]["w_before"], "the ranks' random initial values should differ"
    for rank, got in results.items():
        assert got["bcast"] == [20, 21], got
        assert got["w_after"] == results[1]["w_before"], f"rank {rank} does not hold rank 1's variables"
        assert got["step_after"] == 100, got
        assert got["hook"] == [2.0, 4.0], got
        bad_bcast, bad_vars, bad_hook = got["errors"]
        assert "hvd.broadcast: root_rank 3 is not a rank of the job: its size is 3 (ranks 0..2)" in bad_bcast
        assert "hvd.broadcast_variables: root_rank -1 is not a rank of the job: its size is 3" in bad_vars
        assert "root_rank 5 is not a rank of the job: its size is 3" in bad_hook


def test_allgather_of_different_first_dimensions(results):
    parts = [np.arange(rows * 2, dtype=np.float64).reshape(rows, 2) + 100 * r for r, rows in enumerate([2, 0, 3])]
    want = np.concatenate(parts).tolist()
    for rank, got in results.items():
        assert got["gathered_static"] == [None, 2], got
        assert got["gathered"] == want, got
        assert got["mismatch"].startswith("InvalidArgumentError"), got["mismatch"]
        assert "gathers float32 [1," in got["mismatch"], got["mismatch"]
        assert "every rank must gather the same dtype and the same dimensions after the first" in got["mismatch"]
