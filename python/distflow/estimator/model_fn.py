"""EstimatorSpec and ModeKeys: what a model_fn returns for each mode."""
import collections


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_FIELDS = ["mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
           "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks"]


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """The ops a model_fn built for `mode`: TRAIN needs loss and train_op,
    EVAL needs loss (eval_metric_ops maps names to (value, update_op)),
    PREDICT needs predictions (a tensor or a dict of tensors)."""

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None):
        if mode == ModeKeys.TRAIN and (loss is None or train_op is None):
            raise ValueError("EstimatorSpec: mode TRAIN needs loss and train_op")
        if mode == ModeKeys.EVAL and loss is None:
            raise ValueError("EstimatorSpec: mode EVAL needs loss")
        if mode == ModeKeys.PREDICT and predictions is None:
            raise ValueError("EstimatorSpec: mode PREDICT needs predictions")
        for name, (value, update) in (eval_metric_ops or {}).items():
            if value is None or update is None:
                raise ValueError(f"EstimatorSpec: eval_metric_ops['{name}'] must be (value, update_op)")
        return super().__new__(cls, mode, predictions, loss, train_op, dict(eval_metric_ops or {}), export_outputs,
                               tuple(training_chief_hooks or ()), tuple(training_hooks or ()), scaffold,
                               tuple(evaluation_hooks or ()), tuple(prediction_hooks or ()))
