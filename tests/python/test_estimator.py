"""tf.estimator: an Estimator trained, evaluated and used for prediction
in process (results against NumPy), RunConfig's TF_CONFIG, and
train_and_evaluate as 1 ps + 2 workers + 1 evaluator processes, started by
the test and by distflow-launch --evaluator."""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import distflow.compat.v1 as tf
from test_seed_programs import BUILD, SOURCE, free_port
from test_summaries import read_events

sys.path.insert(0, os.path.join(SOURCE, "examples", "python"))
import estimator_linear  # noqa: E402


def test_train_evaluate_predict_in_process(tmp_path):
    x, y = estimator_linear.make_data(600, 1)
    x_test, y_test = estimator_linear.make_data(200, 2)
    est = tf.estimator.Estimator(estimator_linear.model_fn, model_dir=str(tmp_path / "m"),
                                 params={"learning_rate": 0.1},
                                 config=tf.estimator.RunConfig(log_step_count_steps=None, tf_random_seed=3))
    with pytest.raises(ValueError, match="Could not find trained model"):
        est.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x_test}, y_test, shuffle=False))
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=30, num_epochs=2, shuffle=True))
    assert est.latest_step() == 40  # 600 rows, 2 epochs of 30: the input's end ends training
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=30, num_epochs=None, shuffle=True),
              steps=25)
    assert est.latest_step() == 65
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, num_epochs=None, shuffle=True), max_steps=65)
    assert est.latest_step() == 65  # already there
    results = est.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x_test}, y_test, batch_size=64, shuffle=False))
    assert results["global_step"] == 65
    preds = list(est.predict(tf.estimator.inputs.numpy_input_fn({"x": x_test}, batch_size=64, shuffle=False)))
    assert len(preds) == 200 and set(preds[0]) == {"classes", "logits"}
    classes = np.array([p["classes"] for p in preds])
    logits = np.array([p["logits"] for p in preds])
    np.testing.assert_array_equal(classes, logits.argmax(axis=1))
    # The evaluation's accuracy and loss are those of the predictions.
    assert results["accuracy"] == pytest.approx(np.mean(classes == y_test), abs=1e-6)
    shifted = logits - logits.max(axis=1, keepdims=True)
    xent = -(shifted[np.arange(200), y_test] - np.log(np.exp(shifted).sum(axis=1)))
    # The loss metric is the mean of the per-batch mean losses (batches of 64, 64, 64, 8), as in TF.
    batch_means = [xent[i:i + 64].mean() for i in range(0, 200, 64)]
    assert results["loss"] == pytest.approx(np.mean(batch_means), rel=1e-4)
    assert results["accuracy"] > 0.9
    files = os.listdir(tmp_path / "m")
    assert "checkpoint" in files and any(f.startswith("events.out.tfevents") for f in files)
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "m" / "eval"))


def test_model_fn_must_return_an_estimator_spec(tmp_path):
    est = tf.estimator.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="EstimatorSpec"):
        est.train(tf.estimator.inputs.numpy_input_fn({"x": np.zeros((4, 2), np.float32)}, np.zeros(4, np.int32),
                                                      shuffle=False), steps=1)
    with pytest.raises(ValueError, match="same number of rows"):
        tf.estimator.inputs.numpy_input_fn({"x": np.zeros((4, 2))}, np.zeros(3), shuffle=False)
    with pytest.raises(ValueError, match="shuffle"):
        tf.estimator.inputs.numpy_input_fn({"x": np.zeros((4, 2))}, np.zeros(4))


def test_run_config_reads_tf_config_and_distflow_config(monkeypatch):
    cluster = {"ps": ["h:1"], "worker": ["h:2", "h:3"]}
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("DISTFLOW_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    c = tf.estimator.RunConfig()
    assert (c.task_type, c.task_id, c.master, c.is_chief) == ("worker", 1, "grpc://h:3", False)
    assert (c.num_ps_replicas, c.num_worker_replicas) == (1, 2)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    assert tf.estimator.RunConfig().is_chief
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "evaluator", "index": 0}}))
    c = tf.estimator.RunConfig()
    assert (c.task_type, c.master, c.is_chief) == ("evaluator", "", False)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 2}}))
    with pytest.raises(ValueError, match="index 2 is out of range for job 'worker'"):
        tf.estimator.RunConfig()


def test_train_and_evaluate_as_ps_workers_and_evaluator(tmp_path):
    ports = [free_port() for _ in range(3)]
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"]}
    tasks = [("ps", 0), ("worker", 0), ("worker", 1), ("evaluator", 0)]
    command = [sys.executable, os.path.join(SOURCE, "examples", "python", "estimator_linear.py"),
               f"--model_dir={tmp_path / 'model'}", "--max_steps=300"]
    procs = []
    for job, i in tasks:
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": i}}))
        procs.append(subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    deadline = time.monotonic() + 300
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for (job, i), p, out in zip(tasks, procs, outputs):
        assert p.returncode == 0, f"{job}:{i} exited {p.returncode}:\n{out[-3000:]}"
    m = re.search(r"Task evaluator:0 done: (\{.*\})", outputs[3])
    assert m, outputs[3][-3000:]
    accuracy = float(re.search(r"'accuracy': (?:np\.float32\()?([0-9.]+)", m.group(1)).group(1))
    step = int(re.search(r"'global_step': (\d+)", m.group(1)).group(1))
    assert step >= 300 and accuracy > 0.9, outputs[3][-3000:]
    # The evaluator evaluated the checkpoints as they came, and wrote summaries.
    assert len(re.findall(r"Saving dict for global step", outputs[3])) >= 1
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "model" / "eval"))
    state = (tmp_path / "model" / "checkpoint").read_text()
    assert max(int(n) for n in re.findall(r"model\.ckpt-(\d+)", state)) >= 300
    # Both workers trained: each logged its own steps.
    for w in (1, 2):
        assert "Loss for final step" in outputs[w], outputs[w][-3000:]


def test_train_and_evaluate_under_distflow_launch_with_an_evaluator(tmp_path):
    """distflow-launch --ps 1 --workers 2 --evaluator: the ps runs
    distflow-server, the workers and the evaluator the example; every task
    exits 0, the evaluator's last evaluation is of the final checkpoint, and
    it wrote its metrics as summaries in model_dir/eval."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}  # the tasks read DISTFLOW_CONFIG
    env["PYTHONPATH"] = os.path.join(BUILD, "python")
    out = subprocess.run([os.path.join(BUILD, "tools", "distflow-launch"), "--ps", "1", "--workers", "2",
                          "--evaluator", "--", sys.executable,
                          os.path.join(SOURCE, "examples", "python", "estimator_linear.py"),
                          f"--model_dir={tmp_path / 'model'}", "--max_steps=300"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert re.search(r"started 4 tasks: .*evaluator:0 \(pid \d+\)", text), text[-4000:]
    for task in ("ps:0", "worker:0", "worker:1", "evaluator:0"):
        assert f"[launch] {task} finished" in text, text[-4000:]
    assert "[launch] every task finished" in text, text[-4000:]
    m = re.search(r"\[evaluator:0\] Task evaluator:0 done: (\{.*\})", text)
    assert m, text[-4000:]
    step = int(re.search(r"'global_step': (\d+)", m.group(1)).group(1))
    accuracy = float(re.search(r"'accuracy': (?:np\.float32\()?([0-9.]+)", m.group(1)).group(1))
    assert step >= 300 and accuracy > 0.9, m.group(1)
    # Its metrics are in model_dir/eval as summaries: the last event file holds the final step's accuracy.
    eval_dir = tmp_path / "model" / "eval"
    events = sorted(f for f in os.listdir(eval_dir) if f.startswith("events.out.tfevents"))
    assert events, os.listdir(eval_dir)
    steps_with_accuracy = set()
    for f in events:
        for e in read_events(str(eval_dir / f)):
            if any(v.tag == "accuracy" for v in e.summary.value):
                steps_with_accuracy.add(e.step)
    assert max(steps_with_accuracy) >= 300, steps_with_accuracy
    # The workers trained as the cluster's (the chief's checkpoints), the evaluator was no worker.
    for w in (0, 1):
        assert f"[worker:{w}] " in text and "Loss for final step" in text, text[-4000:]


@pytest.mark.parametrize("args,message", [
    (["--emit", "kubernetes", "--evaluator"], "--evaluator and --emit"),
    (["--cluster_spec=ps|127.0.0.1:1,worker|127.0.0.1:2,evaluator|127.0.0.1:3", "--evaluator"],
     "not part of the cluster spec"),
    (["--ps", "-1", "--evaluator"], "need ps >= 0"),
])
def test_distflow_launch_refuses_a_bad_evaluator_setup(args, message):
    out = subprocess.run([os.path.join(BUILD, "tools", "distflow-launch")] + args + ["--", "/bin/true"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and message in out.stderr, out.stderr
