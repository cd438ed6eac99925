"""distflow.contrib: what TF1 programs used most of tf.contrib — slim,
framework (the global step), layers (regularizers, initializers) and
learn.datasets (MNIST)."""
from distflow.contrib import deprecated, framework, layers, learn, slim  # noqa: F401
