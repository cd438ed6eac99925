"""tf.keras.datasets.mnist.load_data(path): MNIST-format data from this
machine (datasets/_idx.py); without it, Debian's Fashion-MNIST, said on
stderr."""
from distflow.keras.datasets import _idx


def load_data(path="mnist.npz"):
    return _idx.load_data("mnist", path)
