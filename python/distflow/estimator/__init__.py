"""tf.estimator: Estimator, EstimatorSpec, ModeKeys, RunConfig (TF_CONFIG or
DISTFLOW_CONFIG), train_and_evaluate with TrainSpec/EvalSpec, and
inputs.numpy_input_fn."""
from distflow.estimator import inputs  # noqa: F401
from distflow.estimator.estimator import Estimator  # noqa: F401
from distflow.estimator.model_fn import EstimatorSpec, ModeKeys  # noqa: F401
from distflow.estimator.run_config import RunConfig, TaskType  # noqa: F401
from distflow.estimator.training import EvalSpec, TrainSpec, train_and_evaluate  # noqa: F401
