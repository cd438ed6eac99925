"""tensorflow.contrib.learn.python.learn.datasets.mnist: read_data_sets
(dtype=tf.uint8 and reshape=False for the raw [n, 28, 28, 1] bytes),
DataSet and load_mnist, reading MNIST or Debian's Fashion-MNIST."""
from distflow.examples.tutorials.mnist.input_data import (DataSet, Datasets, load_mnist,  # noqa: F401
                                                          read_data_sets)
