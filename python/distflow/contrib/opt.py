"""tf.contrib.opt: LazyAdamOptimizer (Adam whose sparse updates touch only
the looked-up rows; see distflow/train/optimizer.h)."""
from distflow.train.optimizer import LazyAdamOptimizer  # noqa: F401
