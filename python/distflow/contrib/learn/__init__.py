"""tf.contrib.learn: its MNIST data sets (learn.datasets)."""
from distflow.contrib.learn import datasets  # noqa: F401
