"""distflow.contrib: what TF1 programs used most of tf.contrib — slim,
framework (the global step), layers (regularizers, initializers) and
learn.datasets (MNIST)."""
from distflow.contrib import framework, layers, learn, rnn, slim  # noqa: F401

# tf.contrib.data: tf.data's experimental names (distflow/data)
from distflow.data import experimental as data  # noqa: E402,F401
