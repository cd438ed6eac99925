"""Horovod's process sets and Adasum in distflow.horovod.tensorflow, with 3
real ranks under distflow-launch --ps 0: collectives of the set {0, 2} run
among its members only (rank 1 builds none of them and is refused if it
tries), the whole job's collectives still pair afterwards, and
op=hvd.Adasum (hvd.allreduce and DistributedOptimizer, in the whole job and
in the set; small tensors and one large enough for the vector-halving form)
matches Adasum computed here with numpy from its definition."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
TIMEOUT = 180  # generous: a loaded machine is slow, never wrong

PROGRAM = textwrap.dedent("""
    import json
    import numpy as np
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    even = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[even])
    r = hvd.rank()
    out = {"rank": r, "even_size": even.size(), "included": even.included()}

    def grad(rank, n=11):  # neither orthogonal nor parallel across ranks
        return np.sin(0.7 * np.arange(1, n + 1) * (rank + 1)) + 0.1 * rank

    x = tf.constant([float(r + 1), 10.0 * (r + 1)], dtype=tf.float64)
    g = tf.constant(grad(r), dtype=tf.float64)
    fetch = {"adasum_all": hvd.allreduce(g, op=hvd.Adasum),
             # 96,000 bytes: the vector-halving form (docs/COLLECTIVES.md)
             "adasum_big": hvd.allreduce(tf.constant(grad(r, 12000), dtype=tf.float64), op=hvd.Adasum)}
    if even.included():
        fetch["set_sum"] = hvd.allreduce(x, op=hvd.Sum, process_set=even)
        fetch["set_mean"] = hvd.allreduce(x, process_set=even)
        fetch["set_gather"] = hvd.allgather(tf.reshape(x, [1, 2]), process_set=even)
        fetch["set_bcast"] = hvd.broadcast(x, root_rank=2, process_set=even)
        fetch["set_adasum"] = hvd.allreduce(g, op=hvd.Adasum, process_set=even)
        w = tf.Variable(tf.constant([1.0, 2.0], dtype=tf.float64), name="w")
        loss = tf.reduce_sum(w * w) * (r + 1.0)
        opt = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1), process_set=even)
        fetch["set_opt_grad"] = opt.compute_gradients(loss)[0][0]
        out["set_rank"] = even.rank()
    else:
        try:
            hvd.allreduce(x, process_set=even)
            out["outsider"] = "no error"
        except ValueError as e:
            out["outsider"] = str(e)
    # The whole job's collectives pair after the set's (keys counted per set).
    fetch["all_sum"] = hvd.allreduce(x, op=hvd.Sum)
    v = tf.Variable(tf.constant(grad(0, 5), dtype=tf.float64), name="v")
    vloss = tf.reduce_sum(v * tf.constant(grad(r, 5), dtype=tf.float64))  # d/dv = grad(r)
    adasum_opt = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1), op=hvd.Adasum)
    fetch["opt_adasum_grad"] = adasum_opt.compute_gradients(vloss, var_list=[v])[0][0]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(fetch)
    out.update({k: np.asarray(val).tolist() for k, val in got.items()})
    print("RESULT " + json.dumps(out), flush=True)
""")


def adasum_pair(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    return (1 - dot / (2 * aa)) * a + (1 - dot / (2 * bb)) * b


def grad(rank, n=11):
    return np.sin(0.7 * np.arange(1, n + 1) * (rank + 1)) + 0.1 * rank


def test_process_set_and_adasum_across_three_ranks(tmp_path):
    program = tmp_path / "hvd_sets.py"
    program.write_text(PROGRAM)
    env = dict(os.environ)
    env.pop("DISTFLOW_CONFIG", None)
    r = subprocess.run([LAUNCH, "--ps", "0", "--workers", "3", "--", sys.executable, str(program)],
                       capture_output=True, text=True, timeout=TIMEOUT, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    results = {}
    for line in out.splitlines():
        if "] RESULT " in line:
            got = json.loads(line.split("] RESULT ", 1)[1])
            results[got["rank"]] = got
    assert sorted(results) == [0, 1, 2], out[-4000:]

    # 3 ranks (not a power of two): rank 2 is folded into rank 0 first.
    want_all = adasum_pair(adasum_pair(grad(0), grad(2)), grad(1))
    want_set = adasum_pair(grad(0), grad(2))
    want_big = adasum_pair(adasum_pair(grad(0, 12000), grad(2, 12000)), grad(1, 12000))
    want_opt = adasum_pair(adasum_pair(grad(0, 5), grad(2, 5)), grad(1, 5))
    for rank, got in results.items():
        assert got["even_size"] == 2
        np.testing.assert_allclose(got["adasum_all"], want_all, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["adasum_big"], want_big, rtol=1e-12, atol=1e-12)
        assert got["adasum_big"] == results[0]["adasum_big"], "every rank holds the same bytes"
        np.testing.assert_allclose(got["opt_adasum_grad"], want_opt, rtol=1e-12, atol=1e-12)
        assert got["all_sum"] == [6.0, 60.0], got
        assert got["adasum_all"] == results[0]["adasum_all"], "every rank holds the same bytes"
    for rank in (0, 2):
        got = results[rank]
        assert got["included"] is True and got["set_rank"] == rank // 2
        assert got["set_sum"] == [4.0, 40.0], got
        assert got["set_mean"] == [2.0, 20.0], got
        assert got["set_gather"] == [[1.0, 10.0], [3.0, 30.0]], got
        assert got["set_bcast"] == [3.0, 30.0], got
        np.testing.assert_allclose(got["set_adasum"], want_set, rtol=1e-12, atol=1e-12)
        # d/dw of (r + 1) |w|^2, averaged over ranks 0 and 2: 2 w (1 + 3) / 2.
        assert got["set_opt_grad"] == [4.0, 8.0], got
    assert results[1]["included"] is False
    assert "rank 1 is not in process set [0, 2]" in results[1]["outsider"], results[1]["outsider"]
    assert "set_sum" not in results[1]
