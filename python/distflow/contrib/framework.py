"""tf.contrib.framework: the global step helpers TF 1.0-1.3 programs used."""
from distflow.train.training_util import (create_global_step, get_global_step,  # noqa: F401
                                          get_or_create_global_step, assert_global_step)
