"""Horovod's cycle time in distflow.horovod.tensorflow: with HOROVOD_CYCLE_TIME
set, DistributedOptimizer gives every gradient its own CollectiveReduce and
the gradients ready within one cycle are reduced together at run time, as
rank 0 decides, and so are the hvd.allreduce ops of a step; the values are
those of unfused reduction."""
import os
import subprocess
import sys
import textwrap

import pytest

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
TIMEOUT = 180  # generous: a loaded machine is slow, never wrong

from distflow.horovod.tensorflow import fusion as _fusion  # noqa: E402
from distflow.horovod.tensorflow import optimizer as _optimizer  # noqa: E402

PROGRAM = textwrap.dedent("""
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    hvd.init()
    r = hvd.rank()
    # Four small float32 gradients, each with its own CollectiveReduce.
    w = [tf.Variable(tf.ones([k + 1]) * (k + 1.0), name=f"w{k}") for k in range(4)]
    loss = tf.add_n([tf.reduce_sum(v * v) * (r + 1.0) for v in w])
    grads = hvd.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1)).compute_gradients(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(3):
            metadata = tf.RunMetadata()
            values = sess.run([g for g, _ in grads], options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                              run_metadata=metadata)
            trace = metadata.step_stats
            if isinstance(trace, bytes):
                trace = trace.decode()
            ops = trace.count('"op":"CollectiveReduce"')
            fused = trace.count('"op":"CollectiveFusion"')
            print("step", step, "ops", ops, "fused", fused, "grads", [v.tolist() for v in values], flush=True)
""")


# Four hvd.allreduce calls in one step; the fused reductions' records name
# the ops they reduced.
ALLREDUCE_PROGRAM = textwrap.dedent("""
    import json
    import distflow.compat.v1 as tf
    import distflow.horovod.tensorflow as hvd

    hvd.init()
    r = hvd.rank()
    sums = [hvd.allreduce(tf.ones([k + 1]) * (k + 1.0) * (r + 1.0), name=f"ar{k}") for k in range(4)]
    with tf.Session() as sess:
        for step in range(2):
            metadata = tf.RunMetadata()
            values = sess.run(sums, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                              run_metadata=metadata)
            trace = metadata.step_stats
            if isinstance(trace, bytes):
                trace = trace.decode()
            events = json.loads(trace)
            events = events["traceEvents"] if isinstance(events, dict) else events
            ops, flushes, fused = 0, 0, []
            for e in events:
                op = e.get("args", {}).get("op")
                ops += op == "CollectiveReduce"
                if op == "CollectiveFusion":
                    flushes += 1
                    fused += [n.strip() for n in e["args"]["name"].split(":", 1)[1].split(",")]
            print("step", step, "ops", ops, "fused", sorted(fused), "flushes", flushes,
                  "sums", [v.tolist() for v in values], flush=True)
""")


def launch(workers, program, env):
    env = dict(os.environ, **env)
    env.pop("DISTFLOW_CONFIG", None)
    return subprocess.run([LAUNCH, "--ps", "0", "--workers", str(workers), "--", sys.executable, program],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env)


@pytest.mark.parametrize("cycle,ops,fused", [("60000", 4, 1), (None, 1, 0)])
def test_cycle_time_fuses_at_run_time(tmp_path, cycle, ops, fused):
    """With a (long) cycle, the step's four gradients have four ops and one
    fused reduction: the buffer flushes once the last of them came, not at
    the cycle's end. Without one, the graph-time bucket is one op. The
    averaged gradients are the same either way."""
    program = tmp_path / "hvd_cycle.py"
    program.write_text(PROGRAM)
    env = {"HOROVOD_CYCLE_TIME": cycle} if cycle is not None else {}
    r = launch(2, str(program), env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    # d(sum (r+1) v^2)/dv = 2 (r+1) v, averaged over r = 0, 1: 3 v.
    want = [[3.0 * (k + 1)] * (k + 1) for k in range(4)]
    for rank in (0, 1):
        lines = [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith(f"[worker:{rank}] ")]
        for step in range(3):
            assert f"step {step} ops {ops} fused {fused} grads {want}" in lines, out[-4000:]


def test_cycle_time_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("HOROVOD_CYCLE_TIME", raising=False)
    assert _optimizer._cycle_time_ms() is None
    monkeypatch.setenv("HOROVOD_CYCLE_TIME", "2.5")
    assert _optimizer._cycle_time_ms() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("HOROVOD_CYCLE_TIME", bad)
        with pytest.raises(ValueError, match="HOROVOD_CYCLE_TIME is .*milliseconds"):
            _optimizer._cycle_time_ms()


@pytest.mark.parametrize("env,fuses", [({"HOROVOD_CYCLE_TIME": "20"}, True), ({}, False),
                                       ({"HOROVOD_CYCLE_TIME": "20", "HOROVOD_FUSION_THRESHOLD": "0"}, False)])
def test_cycle_time_fuses_allreduce_calls(tmp_path, env, fuses):
    """With a cycle time, each hvd.allreduce keeps its own op and the
    executor reduces them through the stream's fusion buffer: the step's
    fused reductions (one or more, as rank 0's cycle falls) together reduce
    all four ops, each once. Without a cycle, or with a threshold of 0, each
    is reduced alone (no fused reduction). The averages are the same."""
    program = tmp_path / "hvd_allreduce_cycle.py"
    program.write_text(ALLREDUCE_PROGRAM)
    r = launch(2, str(program), env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    # (k + 1) (r + 1) averaged over r = 0, 1: 1.5 (k + 1).
    want = [[1.5 * (k + 1)] * (k + 1) for k in range(4)]
    names = ["ar0", "ar1", "ar2", "ar3"] if fuses else []
    for rank in (0, 1):
        lines = [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith(f"[worker:{rank}] ")]
        for step in range(2):
            line = next((ln for ln in lines if ln.startswith(f"step {step} ")), None)
            assert line is not None, out[-4000:]
            assert f"step {step} ops 4 fused {names} flushes " in line, line
            assert line.endswith(f"sums {want}"), line
            flushes = int(line.split(" flushes ")[1].split()[0])
            assert (1 <= flushes <= 4) if fuses else flushes == 0, line


def test_allreduce_fusion_attributes_follow_the_environment(monkeypatch):
    for name in ("HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD", "DISTFLOW_FUSION_CYCLE_MS"):
        monkeypatch.delenv(name, raising=False)
    assert _fusion.allreduce_attrs(2, adasum=False) == {}
    monkeypatch.setenv("HOROVOD_CYCLE_TIME", "5")
    assert _fusion.allreduce_attrs(2, adasum=False) == {"fusion_cycle_ms": 5.0,
                                                        "fusion_threshold_bytes": _fusion.DEFAULT_FUSION_THRESHOLD}
    assert _fusion.allreduce_attrs(1, adasum=False) == {}, "a group of one rank reduces nothing"
    assert _fusion.allreduce_attrs(2, adasum=True) == {}, "Adasum reduces each tensor alone"
    monkeypatch.setenv("HOROVOD_FUSION_THRESHOLD", "1024")
    assert _fusion.allreduce_attrs(0, adasum=False)["fusion_threshold_bytes"] == 1024, "the elastic group too"
    monkeypatch.setenv("HOROVOD_FUSION_THRESHOLD", "0")
    assert _fusion.allreduce_attrs(2, adasum=False) == {}
    monkeypatch.delenv("HOROVOD_CYCLE_TIME")
    monkeypatch.delenv("HOROVOD_FUSION_THRESHOLD")
    monkeypatch.setenv("DISTFLOW_FUSION_CYCLE_MS", "3")
    assert _fusion.allreduce_attrs(2, adasum=False)["fusion_cycle_ms"] == 3.0
    monkeypatch.setenv("DISTFLOW_FUSION_CYCLE_MS", "later")
    with pytest.raises(ValueError, match="DISTFLOW_FUSION_CYCLE_MS is .*milliseconds"):
        _fusion.allreduce_attrs(2, adasum=False)
