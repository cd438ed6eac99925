"""distflow.contrib: what TF1 programs used most of tf.contrib — slim,
framework (the global step), layers (regularizers, initializers) and
learn.datasets (MNIST), opt (LazyAdamOptimizer)."""
from distflow.contrib import framework, layers, learn, opt, slim  # noqa: F401
