"""distflow.contrib: what TF1 programs used most of tf.contrib — slim,
framework (the global step), layers (regularizers, initializers) and
learn.datasets (MNIST), opt (LazyAdamOptimizer), rnn (RNN cells), data (tf.data's experimental names)."""
from distflow.contrib import deprecated, framework, layers, learn, opt, rnn, slim  # noqa: F401

# tf.contrib.data: tf.data's experimental names (distflow/data)
from distflow.data import experimental as data  # noqa: E402,F401
