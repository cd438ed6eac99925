"""tf.estimator.train_and_evaluate with TrainSpec and EvalSpec: what this
process does depends on its task in TF_CONFIG (or DISTFLOW_CONFIG):

- no cluster: train, then evaluate, locally;
- chief / worker: start this task's server and train on the cluster
  (variables on the ps tasks), the chief saving checkpoints to model_dir;
- ps: serve the variables until the chief ends the cluster;
- evaluator: evaluate each new checkpoint in model_dir (at most every
  `throttle_secs`) until one reaches the TrainSpec's max_steps.

model_dir must be shared by the chief and the evaluator (one machine, or a
shared file system)."""
import collections
import os
import time

from distflow import train as _train
from distflow.estimator.run_config import TaskType


class TrainSpec(collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks"])):
    def __new__(cls, input_fn, max_steps=None, hooks=None):
        if not callable(input_fn):
            raise TypeError("TrainSpec: input_fn must be callable")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"TrainSpec: max_steps must be positive, got {max_steps}")
        return super().__new__(cls, input_fn, max_steps, tuple(hooks or ()))


class EvalSpec(collections.namedtuple("EvalSpec", ["input_fn", "steps", "name", "hooks", "exporters",
                                                   "start_delay_secs", "throttle_secs"])):
    def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None, start_delay_secs=120,
                throttle_secs=600):
        if not callable(input_fn):
            raise TypeError("EvalSpec: input_fn must be callable")
        if steps is not None and steps <= 0:
            raise ValueError(f"EvalSpec: steps must be positive or None, got {steps}")
        return super().__new__(cls, input_fn, steps, name, tuple(hooks or ()), exporters, start_delay_secs,
                               throttle_secs)


def _start_server(config):
    return _train.Server(config.cluster_spec, job_name=config.task_type, task_index=config.task_id)


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains and evaluates as this process's task; returns the last
    evaluation's metrics (on the evaluator, or locally) and None elsewhere."""
    config = estimator.config
    if not config.cluster_spec.jobs:
        if config.task_type == TaskType.EVALUATOR:
            raise ValueError("train_and_evaluate: an evaluator task needs a cluster in TF_CONFIG")
        estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks), max_steps=train_spec.max_steps)
        return estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=list(eval_spec.hooks),
                                  name=eval_spec.name)
    task = config.task_type
    if task == TaskType.EVALUATOR:
        return _evaluate_checkpoints(estimator, train_spec, eval_spec)
    server = _start_server(config)
    if task == TaskType.PS:
        server.join()
        return None
    if task not in (TaskType.WORKER, TaskType.CHIEF, TaskType.MASTER):
        raise ValueError(f"train_and_evaluate: unknown task type '{task}' (chief, worker, ps or evaluator)")
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks), max_steps=train_spec.max_steps)
    return None


def _evaluate_checkpoints(estimator, train_spec, eval_spec):
    """The evaluator's loop: each new checkpoint once, until the last one."""
    last_evaluated, results = None, None
    deadline_idle = time.monotonic() + max(600, 4 * eval_spec.throttle_secs)
    while True:
        ckpt = _train.latest_checkpoint(estimator.model_dir)
        if ckpt and ckpt != last_evaluated:
            results = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=list(eval_spec.hooks),
                                         checkpoint_path=ckpt, name=eval_spec.name)
            last_evaluated = ckpt
            deadline_idle = time.monotonic() + max(600, 4 * eval_spec.throttle_secs)
            if train_spec.max_steps is not None and results["global_step"] >= train_spec.max_steps:
                return results
            time.sleep(eval_spec.throttle_secs)
            continue
        if time.monotonic() > deadline_idle:
            raise RuntimeError(f"train_and_evaluate: the evaluator saw no new checkpoint in {estimator.model_dir} "
                               f"for {max(600, 4 * eval_spec.throttle_secs)} s; training stopped before max_steps?")
        time.sleep(1.0 if not os.path.isdir(estimator.model_dir) else 0.5)
