"""tensorflow.contrib.learn.python.learn.datasets, as programs import it."""
from distflow.contrib.learn.python.learn.datasets import mnist  # noqa: F401
