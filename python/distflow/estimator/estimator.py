"""tf.estimator.Estimator: a model_fn trained, evaluated and used for
prediction in a fresh graph per call, with checkpoints and summaries in
model_dir. train() runs a MonitoredTrainingSession (distributed when the
RunConfig names a cluster: variables on the ps tasks through
replica_device_setter, the chief initialising and saving); evaluate() and
predict() restore the newest checkpoint into a local session."""
import inspect
import os
import tempfile

import numpy as np

from distflow import framework as _fw
from distflow import errors as _errors
from distflow import metrics as _metrics
from distflow import train as _train
from distflow.data import dataset_ops as _ds
from distflow.estimator.model_fn import EstimatorSpec, ModeKeys
from distflow.estimator.run_config import RunConfig


class Estimator:
    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        if not callable(model_fn):
            raise TypeError(f"Estimator: model_fn must be callable, got {model_fn!r}")
        if warm_start_from is not None:
            raise NotImplementedError("Estimator(warm_start_from=...)")
        self._config = config if config is not None else RunConfig()
        if model_dir is None:
            model_dir = self._config.model_dir or tempfile.mkdtemp(prefix="distflow_estimator_")
        elif self._config.model_dir not in (None, model_dir):
            raise ValueError(f"Estimator: model_dir '{model_dir}' differs from the config's '{self._config.model_dir}'")
        self._model_dir = model_dir
        self._config = self._config.replace(model_dir=model_dir)
        self._model_fn = model_fn
        self._params = dict(params or {})
        self._args = set(inspect.signature(model_fn).parameters)
        if "features" not in self._args and len(self._args) < 1:
            raise ValueError("Estimator: model_fn must take features")

    model_dir = property(lambda self: self._model_dir)
    config = property(lambda self: self._config)
    params = property(lambda self: dict(self._params))
    model_fn = property(lambda self: self._model_fn)

    # ---- building -----------------------------------------------------------
    def _input(self, input_fn, mode):
        args = inspect.signature(input_fn).parameters
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self._params
        if "config" in args:
            kwargs["config"] = self._config
        result = input_fn(**kwargs)
        if isinstance(result, _ds.Dataset):
            result = result.make_one_shot_iterator().get_next()
        if isinstance(result, tuple) and len(result) == 2:
            return result
        return result, None

    def _call_model_fn(self, features, labels, mode):
        kwargs = {}
        if "labels" in self._args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("Estimator: the input_fn gave labels but model_fn takes no 'labels' argument")
        if "mode" in self._args:
            kwargs["mode"] = mode
        if "params" in self._args:
            kwargs["params"] = self._params
        if "config" in self._args:
            kwargs["config"] = self._config
        spec = self._model_fn(features=features, **kwargs)
        if not isinstance(spec, EstimatorSpec):
            raise ValueError(f"Estimator: model_fn must return an EstimatorSpec, got {type(spec).__name__}")
        return spec

    def _device_fn(self):
        c = self._config
        if c.device_fn is not None:
            return c.device_fn
        if c.num_ps_replicas > 0 and c.task_type in ("worker", "chief", "master"):
            return _train.replica_device_setter(ps_tasks=c.num_ps_replicas,
                                                worker_device=f"/job:{c.task_type}/task:{c.task_id}",
                                                cluster=c.cluster_spec)
        return None

    def _graph(self):
        g = _fw.Graph()
        if self._config.tf_random_seed is not None:
            g.seed = self._config.tf_random_seed
        return g

    # ---- train ----------------------------------------------------------------
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        if steps is not None and max_steps is not None:
            raise ValueError("Estimator.train: give steps or max_steps, not both")
        if (steps is not None and steps <= 0) or (max_steps is not None and max_steps <= 0):
            raise ValueError(f"Estimator.train: steps and max_steps must be positive, got {steps}, {max_steps}")
        if max_steps is not None and self.latest_step() >= max_steps:
            return self  # already trained that far, as TF
        c = self._config
        with self._graph().as_default() as g:
            device_fn = self._device_fn()
            with _fw.device(device_fn) if device_fn is not None else _nullcontext():
                global_step = _train.get_or_create_global_step()
                features, labels = self._input(input_fn, ModeKeys.TRAIN)
                spec = self._call_model_fn(features, labels, ModeKeys.TRAIN)
            from distflow import summary as _summary
            _summary.scalar("loss", spec.loss)
            all_hooks = list(hooks or []) + list(spec.training_hooks)
            if steps is not None or max_steps is not None:
                all_hooks.append(_train.StopAtStepHook(num_steps=steps, last_step=max_steps))
            all_hooks.append(_train.NanTensorHook(spec.loss))
            if c.log_step_count_steps:
                all_hooks.append(_train.LoggingTensorHook({"loss": spec.loss, "step": global_step},
                                                          every_n_iter=c.log_step_count_steps))
            chief_hooks = list(spec.training_chief_hooks)
            saver = _train.Saver(max_to_keep=c.keep_checkpoint_max, sharded=True, allow_empty=True)
            chief_hooks.append(_train.CheckpointSaverHook(
                self._model_dir, save_secs=c.save_checkpoints_secs, save_steps=c.save_checkpoints_steps,
                saver=saver, listeners=saving_listeners))
            scaffold = spec.scaffold or _train.Scaffold(saver=saver)
            os.makedirs(self._model_dir, exist_ok=True)
            loss = None
            with _train.MonitoredTrainingSession(
                    master=c.master, is_chief=c.is_chief, checkpoint_dir=self._model_dir, scaffold=scaffold,
                    hooks=all_hooks, chief_only_hooks=chief_hooks, save_checkpoint_secs=None,
                    save_checkpoint_steps=None, save_summaries_steps=c.save_summary_steps, config=c.session_config,
                    log_step_count_steps=c.log_step_count_steps) as sess:
                try:
                    while not sess.should_stop():
                        _, loss = sess.run([spec.train_op, spec.loss])
                except _errors.OutOfRangeError:
                    pass  # the input is exhausted: training is over, as in TF
            if loss is not None:
                print(f"Loss for final step: {loss}.", flush=True)
        return self

    # ---- evaluate --------------------------------------------------------------
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        checkpoint_path = checkpoint_path or _train.latest_checkpoint(self._model_dir)
        if not checkpoint_path:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        with self._graph().as_default() as g:
            global_step = _train.get_or_create_global_step()
            features, labels = self._input(input_fn, ModeKeys.EVAL)
            spec = self._call_model_fn(features, labels, ModeKeys.EVAL)
            metrics = dict(spec.eval_metric_ops)
            if "loss" not in metrics:
                metrics["loss"] = _metrics.mean(spec.loss)
            update = _fw.group(*[u for _, u in metrics.values()])
            values = {k: v for k, (v, _) in metrics.items()}
            all_hooks = list(hooks or []) + list(spec.evaluation_hooks)
            saver = _train.Saver(allow_empty=True)
            for h in all_hooks:
                h.begin()
            with _fw.Session(config=self._config.session_config) as sess:
                saver.restore(sess, checkpoint_path)
                sess.run(_fw.local_variables_initializer())
                n = 0
                try:
                    while steps is None or n < steps:
                        sess.run(update)
                        n += 1
                except _errors.OutOfRangeError:
                    pass
                results = sess.run(values)
                results["global_step"] = int(sess.run(global_step))
                for h in all_hooks:
                    h.end(sess)
        self._write_eval_summaries(results, name)
        print(f"Saving dict for global step {results['global_step']}: "
              + ", ".join(f"{k} = {v}" for k, v in sorted(results.items())), flush=True)
        return results

    def _write_eval_summaries(self, results, name):
        from distflow import summary as _summary
        eval_dir = os.path.join(self._model_dir, "eval" if not name else f"eval_{name}")
        writer = _summary.FileWriter(eval_dir)
        s = _summary.Summary()
        for k, v in sorted(results.items()):
            if k != "global_step" and np.ndim(v) == 0:
                s.value.add(tag=k, simple_value=float(v))
        writer.add_summary(s, results["global_step"])
        writer.close()

    # ---- predict ------------------------------------------------------------------
    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None, yield_single_examples=True):
        checkpoint_path = checkpoint_path or _train.latest_checkpoint(self._model_dir)
        if not checkpoint_path:
            raise ValueError(f"Could not find trained model in model_dir: {self._model_dir}.")
        with self._graph().as_default():
            _train.get_or_create_global_step()
            features, _ = self._input(input_fn, ModeKeys.PREDICT)
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT)
            preds = spec.predictions
            single = not isinstance(preds, dict)
            if not single and predict_keys is not None:
                keys = [predict_keys] if isinstance(predict_keys, str) else list(predict_keys)
                missing = [k for k in keys if k not in preds]
                if missing:
                    raise ValueError(f"Estimator.predict: predict_keys {missing} are not among the predictions "
                                     f"{sorted(preds)}")
                preds = {k: preds[k] for k in keys}
            saver = _train.Saver(allow_empty=True)
            with _fw.Session(config=self._config.session_config) as sess:
                saver.restore(sess, checkpoint_path)
                sess.run(_fw.local_variables_initializer())
                while True:
                    try:
                        out = sess.run(preds)
                    except _errors.OutOfRangeError:
                        return
                    if not yield_single_examples:
                        yield out
                        continue
                    n = len(out) if single else len(next(iter(out.values())))
                    for i in range(n):
                        yield out[i] if single else {k: v[i] for k, v in out.items()}

    # ---- checkpoints ---------------------------------------------------------------
    def latest_checkpoint(self):
        return _train.latest_checkpoint(self._model_dir)

    def latest_step(self):
        ckpt = self.latest_checkpoint()
        if not ckpt:
            return 0
        try:
            return int(ckpt.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            return 0

    def get_variable_names(self):
        raise NotImplementedError("Estimator.get_variable_names")


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
