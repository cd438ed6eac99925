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


@pytest.mark.parametrize("workers,threshold,fp16", [(2, None, False), (3, "0", False), (3, None, True)])
def test_horovod_program_trains_with_identical_replicas(workers, threshold, fp16):
    """examples/python/horovod_mnist.py (a Horovod TF1 program, only its
    import changed) on Fashion-MNIST: every rank ends with the same
    variables, and the loss on a fixed test batch fell. Fused (the default
    threshold) with 2 ranks, every gradient alone with 3, and fused with
    hvd.Compression.fp16 (--fp16-allreduce) with 3."""
    env = {} if threshold is None else {"HOROVOD_FUSION_THRESHOLD": threshold}
    r = launch(workers, [os.path.join(SOURCE, "examples", "python", "horovod_mnist.py"), "--num-steps",
                         str(60 * workers)] + (["--fp16-allreduce"] if fp16 else []), env)
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


FP16_PROGRAM = textwrap.dedent("""
    import numpy as np
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    hvd.init()
    r = hvd.rank()
    x = tf.constant(np.linspace(-3.0, 3.0, 11) / 7.0 + r / 3.0, dtype=tf.float32)
    plain, fp16 = hvd.allreduce(x), hvd.allreduce(x, compression=hvd.Compression.fp16)
    ints = hvd.allreduce(tf.constant([100001 + r], dtype=tf.int64), op=hvd.Sum, compression=hvd.Compression.fp16)
    w = tf.Variable(tf.constant(np.linspace(0.1, 2.0, 300), dtype=tf.float32), name="w")
    b = tf.Variable(tf.constant(0.3, dtype=tf.float64), name="b")
    loss = tf.reduce_sum(w * w * (r + 1.0) / 3.0) + tf.cast(b * b, tf.float32) * (r + 1.0)
    sgd = tf.train.GradientDescentOptimizer(0.1)
    grads_plain = hvd.DistributedOptimizer(sgd).compute_gradients(loss)
    grads_fp16 = hvd.DistributedOptimizer(sgd, compression=hvd.Compression.fp16).compute_gradients(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, c, i = sess.run([plain, fp16, ints])
        gp, gf = sess.run([[g for g, _ in grads_plain], [g for g, _ in grads_fp16]])
    def report(name, p, f):
        p, f = np.asarray(p, np.float64), np.asarray(f, np.float64)
        exact16 = bool(np.all(f.astype(np.float16).astype(np.float64) == f))
        print(name, "maxdiff", float(np.max(np.abs(p - f))), "maxabs", float(np.max(np.abs(p))),
              "differs", bool(np.any(p != f)), "fp16values", exact16, flush=True)
    report("allreduce", a, c)
    report("grad_w", gp[0], gf[0])
    report("grad_b", gp[1], gf[1])
    print("ints", i.tolist(), flush=True)
""")


def test_fp16_compression_matches_none_within_fp16_tolerance(tmp_path):
    """hvd.allreduce and DistributedOptimizer with hvd.Compression.fp16
    against Compression.none on the same tensors, 2 ranks: every result is
    a float16 number, close to the uncompressed one within float16's
    precision (2^-11 relative, plus the inputs' own rounding) but not equal;
    integers are reduced uncompressed, as Horovod's fp16 casts only
    floating tensors."""
    program = tmp_path / "hvd_fp16.py"
    program.write_text(FP16_PROGRAM)
    r = launch(2, [str(program)])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    for rank in (0, 1):
        lines = [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith(f"[worker:{rank}] ")]
        assert "ints [200003]" in lines, out[-4000:]
        for name in ("allreduce", "grad_w", "grad_b"):
            found = [ln.split() for ln in lines if ln.startswith(name + " ")]
            assert found, out[-4000:]
            _, _, maxdiff, _, maxabs, _, differs, _, exact16 = found[0]
            assert exact16 == "True", found[0]
            assert differs == "True", found[0]
            assert float(maxdiff) <= 2.0 ** -9 * float(maxabs), found[0]


def test_a_rank_that_raises_fails_the_others_naming_it(tmp_path):
    """Ranks started by hand with the launcher's DISTFLOW_CONFIG: rank 1
    raises after their first all-reduce; rank 0's next all-reduce fails
    naming it instead of waiting. (Rank 1 dies after a first reduction so
    that rank 0's session exists: a session created after a peer died
    waits for that peer's devices, up to its wait_for_tasks.)"""
    program = tmp_path / "dies.py"
    program.write_text(textwrap.dedent("""
        import distflow.compat.v1 as tf
        import distflow.horovod.tensorflow as hvd
        hvd.init()
        with tf.Session() as sess:
            sess.run(hvd.allreduce(tf.constant([1.0])))
            if hvd.rank() == 1:
                raise RuntimeError("rank 1 gives up")
            sess.run(hvd.allreduce(tf.constant([2.0])))
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


def test_stall_check_names_the_rank_that_has_not_joined(tmp_path):
    """HOROVOD_STALL_CHECK_TIME_SECONDS=0.2: rank 1 holds back from the
    all-reduce until the test has seen rank 0's stall report, which names
    rank 1 as not joined (and repeats); then the all-reduce completes on
    both, the stall check having failed nothing."""
    import threading

    marker = tmp_path / "go"
    program = tmp_path / "late.py"
    program.write_text(textwrap.dedent(f"""
        import os, time
        import distflow.compat.v1 as tf
        import distflow.horovod.tensorflow as hvd
        hvd.init()
        total = hvd.allreduce(tf.constant([hvd.rank() + 1.0]), op=hvd.Sum, name="late_sum")
        if hvd.rank() == 1:
            deadline = time.time() + {TIMEOUT}
            while not os.path.exists({str(marker)!r}) and time.time() < deadline:
                time.sleep(0.02)
        with tf.Session() as sess:
            print("total", sess.run(total).tolist(), flush=True)
    """))
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
    procs = []
    for rank in range(2):
        env = dict(os.environ, HOROVOD_STALL_CHECK_TIME_SECONDS="0.2",
                   DISTFLOW_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": rank}}))
        env.pop("DISTFLOW_STALL_CHECK_SECS", None)
        procs.append(subprocess.Popen([sys.executable, str(program)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    lines, reported = [], threading.Event()

    def read_rank0():
        for line in procs[0].stdout:
            lines.append(line)
            if sum("Stall check:" in ln and "'late_sum'" in ln for ln in lines) >= 2:
                reported.set()

    reader = threading.Thread(target=read_rank0, daemon=True)
    reader.start()
    try:
        got = reported.wait(TIMEOUT)
        marker.write_text("go")
        out1 = procs[1].communicate(timeout=TIMEOUT)[0]
        procs[0].wait(timeout=TIMEOUT)
        reader.join(TIMEOUT)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    out0 = "".join(lines)
    assert got, out0[-3000:]
    stall = [ln for ln in lines if "Stall check:" in ln and "'late_sum'" in ln]  # (the barriers may stall too)
    assert "CollectiveReduce 'late_sum' (group 1 of 2, instance " in stall[0], stall[0]
    assert "on rank 0 (/job:worker/replica:0/task:0)" in stall[0], stall[0]
    assert "Not joined yet: rank 1 (/job:worker/replica:0/task:1)." in stall[0], stall[0]
    assert procs[0].returncode == 0 and procs[1].returncode == 0, (out0 + out1)[-3000:]
    assert "total [3.0]" in out0 and "total [3.0]" in out1, (out0 + out1)[-3000:]


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
    # The coordinator task distflow-launch adds to elastic jobs only.
    for name in ("DISTFLOW_ELASTIC", "HOROVOD_ELASTIC", "DISTFLOW_JOIN", "DISTFLOW_JOIN_AS"):
        monkeypatch.delenv(name, raising=False)
    coordinated = {"cluster": {"coordinator": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
                   "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("DISTFLOW_CONFIG", json.dumps(coordinated))
    with pytest.raises(ValueError, match=r"a 'coordinator' job, which only elastic jobs have"):
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


def test_only_the_launchers_own_join_flags_are_taken(monkeypatch):
    """--join and --join_as are matched whole, as the last arguments: a
    program's --joint=3 or --join_assets=x stays its own; a joiner of an
    elastic all-reduce job is told in its environment, argv untouched."""
    from distflow.horovod.tensorflow import basics

    def strip(argv, env=None):
        monkeypatch.setattr(sys, "argv", list(argv))
        monkeypatch.setattr(basics, "_join", None)
        for name in ("DISTFLOW_CONFIG", "DISTFLOW_JOIN", "DISTFLOW_JOIN_AS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        basics._strip_launcher_flags()
        return sys.argv[1:], basics._join

    assert strip(["p", "--joint=3", "--join=10.0.0.1:2222", "--join_as=10.0.0.2:2300"]) == \
        (["--joint=3"], ("10.0.0.1:2222", "10.0.0.2:2300"))
    for own in (["--join_assets=x", "--joiner=y"], ["--jo=1.2.3.4:5", "--join_a=1.2.3.4:6"],
                ["--join=10.0.0.1:2222"]):  # a --join alone is the program's (the launcher gives both)
        assert strip(["p"] + own) == (own, None), own
    env = {"DISTFLOW_JOIN": "10.0.0.1:2222", "DISTFLOW_JOIN_AS": "10.0.0.2:2300"}
    assert strip(["p", "--join-marker=/tmp/m", "--steps", "3"], env) == \
        (["--join-marker=/tmp/m", "--steps", "3"], ("10.0.0.1:2222", "10.0.0.2:2300"))


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
