"""distflow.horovod.tensorflow (Horovod's TF1 API): a Horovod-style program
trained by real processes under distflow-launch --ps 0, the collective ops
between ranks, tensor fusion in DistributedOptimizer, and the errors."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "py"))
from ports import free_port  # noqa: E402  (ports named before their servers start)
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
TIMEOUT = 180  # generous: a loaded machine is slow, never wrong

import distflow.horovod.tensorflow as hvd  # noqa: E402


def launch(workers, program, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    env.pop("DISTFLOW_CONFIG", None)
    return subprocess.run([LAUNCH, "--ps", "0", "--workers", str(workers), "--", sys.executable] + program,
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)


def reports(out, workers):
    """{rank: (first loss, last loss, checksum)} from horovod_mnist.py's lines."""
    found = {}
    for m in re.finditer(r"rank (\d+) of (\d+): loss ([0-9.]+) -> ([0-9.]+); variables ([0-9a-f]+)", out):
        assert int(m.group(2)) == workers, m.group(0)
        found[int(m.group(1))] = (float(m.group(3)), float(m.group(4)), m.group(5))
    return found


@pytest.mark.parametrize("workers,threshold", [(2, None), (3, "0")])
def test_horovod_program_trains_with_identical_replicas(workers, threshold):
    """examples/python/horovod_mnist.py (a Horovod TF1 program, only its
    import changed) on Fashion-MNIST: every rank ends with the same
    variables, and the loss on a fixed test batch fell. Fused (the default
    threshold) with 2 ranks, every gradient alone with 3."""
    env = {} if threshold is None else {"HOROVOD_FUSION_THRESHOLD": threshold}
    r = launch(workers, [os.path.join(SOURCE, "examples", "python", "horovod_mnist.py"), "--num-steps",
                         str(60 * workers)], env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    found = reports(out, workers)
    assert sorted(found) == list(range(workers)), out[-4000:]
    first, last, checksum = found[0]
    for rank, (f, l, c) in found.items():
        assert c == checksum, f"rank {rank}'s variables differ from rank 0's:\n{out[-4000:]}"
        assert f == first and l == last, out[-4000:]
    assert last < 0.8 * first, f"the loss did not fall enough: {first} -> {last}"


def test_ranks_resume_equal_from_rank_0s_checkpoint(tmp_path):
    """Only rank 0 writes and restores checkpoints; the broadcast hook gives
    every rank its restored values, the optimizer's slots included, so a
    resumed job keeps identical replicas."""
    program = [os.path.join(SOURCE, "examples", "python", "horovod_mnist.py"), "--num-steps", "60",
               "--checkpoint-dir", str(tmp_path / "ckpt")]
    first = launch(2, program)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    before = reports(first.stdout + first.stderr, 2)
    second = launch(2, program[:2] + ["120"] + program[3:])
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-4000:]
    after = reports(out, 2)
    assert sorted(after) == [0, 1], out[-4000:]
    assert after[0][0] == before[0][1], "rank 0 did not resume from its checkpoint"
    assert after[1] == after[0], f"the ranks differ after resuming: {after}"


OPS_PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    hvd.init()
    r, n = hvd.rank(), hvd.size()
    assert (hvd.local_rank(), hvd.local_size()) == (r, n)  # every rank on 127.0.0.1
    x = tf.constant([r + 1.0, 2.0 * (r + 1)])
    mean, total = hvd.allreduce(x), hvd.allreduce(x, op=hvd.Sum)
    root = hvd.broadcast(tf.constant([10 * r, 10 * r + 1], dtype=tf.int64), root_rank=1)
    gathered = hvd.allgather(tf.constant([[r, r]], dtype=tf.int32))
    # DistributedOptimizer: four small float32 gradients, one collective
    # when fused, four with HOROVOD_FUSION_THRESHOLD=0.
    w = [tf.Variable(tf.ones([k + 1]) * (k + 1.0), name=f"w{k}") for k in range(4)]
    loss = tf.add_n([tf.reduce_sum(v * v) * (r + 1.0) for v in w])
    grads = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1)).compute_gradients(loss)
    mismatched = hvd.allreduce(tf.ones([3 + 2 * r]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        print("mean", sess.run(mean).tolist(), "sum", sess.run(total).tolist(), flush=True)
        print("broadcast", sess.run(root).tolist(), "gathered", sess.run(gathered).tolist(), flush=True)
        # The collectives the step ran, from its trace.
        metadata = tf.RunMetadata()
        values = sess.run([g for g, _ in grads], options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                          run_metadata=metadata)
        trace = metadata.step_stats
        runs = trace.count(b'"op":"CollectiveReduce"' if isinstance(trace, bytes) else '"op":"CollectiveReduce"')
        print("collectives", runs, "grads", [v.tolist() for v in values], flush=True)
        try:
            sess.run(mismatched)
            print("mismatch: no error", flush=True)
        except tf.errors.OpError as e:
            print("mismatch:", type(e).__name__, str(e).replace(chr(10), " "), flush=True)
""")


@pytest.mark.parametrize("threshold,collectives", [(None, 1), ("0", 4)])
def test_collective_ops_between_ranks(tmp_path, threshold, collectives):
    program = tmp_path / "hvd_ops.py"
    program.write_text(OPS_PROGRAM)
    env = {} if threshold is None else {"HOROVOD_FUSION_THRESHOLD": threshold}
    r = launch(2, [str(program)], env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    for rank in (0, 1):
        lines = [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith(f"[worker:{rank}] ")]
        assert "mean [1.5, 3.0] sum [3.0, 6.0]" in lines, out[-4000:]
        assert "broadcast [10, 11] gathered [[0, 0], [1, 1]]" in lines, out[-4000:]
        # d(sum (r+1) v^2)/dv = 2 (r+1) v, averaged over r = 0, 1: 3 v.
        want = [[3.0 * (k + 1)] * (k + 1) for k in range(4)]
        assert f"collectives {collectives} grads {want}" in lines, out[-4000:]
        mismatch = [ln for ln in lines if ln.startswith("mismatch:")]
        assert mismatch and "InvalidArgumentError" in mismatch[0], out[-4000:]
        assert "every rank must run the op with the same dtype and shape" in mismatch[0], mismatch


def test_a_rank_that_raises_fails_the_others_naming_it(tmp_path):
    """Ranks started by hand with the launcher's DISTFLOW_CONFIG: rank 1
    raises after init; rank 0's all-reduce fails naming it instead of
    waiting."""
    program = tmp_path / "dies.py"
    program.write_text(textwrap.dedent("""
        import distflow.compat.v1 as tf
        import distflow.horovod.tensorflow as hvd
        hvd.init()
        if hvd.rank() == 1:
            raise RuntimeError("rank 1 gives up")
        with tf.Session() as sess:
            sess.run(hvd.allreduce(tf.constant([1.0])))
    """))
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
    procs = []
    for rank in range(2):
        env = dict(os.environ, DISTFLOW_CONFIG=json.dumps({"cluster": cluster,
                                                           "task": {"type": "worker", "index": rank}}))
        procs.append(subprocess.Popen([sys.executable, str(program)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        outs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1].returncode != 0 and "rank 1 gives up" in outs[1], outs[1][-3000:]
    assert procs[0].returncode != 0, outs[0][-3000:]
    assert "rank 1 (/job:worker/replica:0/task:1)" in outs[0], outs[0][-3000:]


def test_errors_before_init_and_without_the_launcher(monkeypatch):
    with pytest.raises(ValueError, match=r"Horovod has not been initialized; use hvd.init\(\) before hvd.rank"):
        hvd.rank()
    with pytest.raises(ValueError, match="before hvd.allreduce"):
        hvd.allreduce([1.0])
    with pytest.raises(ValueError, match="before hvd.DistributedOptimizer"):
        hvd.DistributedOptimizer(None)
    monkeypatch.delenv("DISTFLOW_CONFIG", raising=False)
    with pytest.raises(ValueError, match=r"DISTFLOW_CONFIG is not set.*distflow-launch --ps 0 --workers N -- "):
        hvd.init()
    monkeypatch.setenv("DISTFLOW_CONFIG", "{not json")
    with pytest.raises(ValueError, match="DISTFLOW_CONFIG is not valid JSON"):
        hvd.init()
    ps = {"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("DISTFLOW_CONFIG", json.dumps(ps))
    with pytest.raises(ValueError, match=r"jobs \['ps', 'worker'\].*--ps 0"):
        hvd.init()
    two = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 2}}
    monkeypatch.setenv("DISTFLOW_CONFIG", json.dumps(two))
    with pytest.raises(ValueError, match=r"rank 2, but its cluster has 2 workers \(ranks 0..1\)"):
        hvd.init()
    two["task"]["index"] = 0
    monkeypatch.setenv("DISTFLOW_CONFIG", json.dumps(two))
    with pytest.raises(ValueError, match=r"hvd.init\(comm=\[0, 1, 2\]\): the job has 2 ranks"):
        hvd.init(comm=[0, 1, 2])
    assert not hvd.is_initialized()
    assert (hvd.mpi_built(), hvd.nccl_built(), hvd.gloo_built()) == (False, False, False)


def test_launcher_flags_are_removed_from_argv(tmp_path):
    """The flags distflow-launch appends never reach the program's own
    argparse (a Horovod program parses its arguments at import)."""
    program = tmp_path / "args.py"
    program.write_text(textwrap.dedent("""
        import argparse, sys
        import distflow.horovod.tensorflow as hvd
        parser = argparse.ArgumentParser()
        parser.add_argument("--steps", type=int)
        print("parsed", parser.parse_args().steps, sys.argv[1:], flush=True)
        hvd.init()
        print("rank", hvd.rank(), flush=True)
    """))
    r = launch(2, [str(program), "--steps", "7"])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert out.count("parsed 7 ['--steps', '7']") == 2, out[-3000:]
    assert "[worker:1] rank 1" in out, out[-3000:]


def test_keras_datasets_read_debians_fashion_mnist(tmp_path):
    import numpy as np

    import distflow.compat.v1 as tf
    (x, y), (xt, yt) = tf.keras.datasets.fashion_mnist.load_data()
    assert (x.shape, y.shape, xt.shape, yt.shape) == ((60000, 28, 28), (60000,), (10000, 28, 28), (10000,))
    assert x.dtype == np.uint8 and set(np.unique(y)) == set(range(10))
    (x2, _), _ = tf.keras.datasets.mnist.load_data(str(tmp_path / "MNIST-data"))  # absent: Debian's data
    assert np.array_equal(x2[:10], x[:10])
    npz = tmp_path / "mine.npz"
    np.savez(npz, x_train=x[:5], y_train=y[:5], x_test=xt[:2], y_test=yt[:2])
    (x3, y3), (xt3, _) = tf.keras.datasets.mnist.load_data(str(npz))
    assert x3.shape == (5, 28, 28) and xt3.shape == (2, 28, 28) and np.array_equal(y3, y[:5])
    np.savez(npz, x_train=x[:5])
    with pytest.raises(ValueError, match=r"\['y_train', 'x_test', 'y_test'\] missing"):
        tf.keras.datasets.mnist.load_data(str(npz))
