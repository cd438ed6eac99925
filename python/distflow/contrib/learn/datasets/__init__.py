"""tf.contrib.learn.datasets: load_dataset("mnist") and the mnist module."""
from distflow.contrib.learn.python.learn.datasets import mnist  # noqa: F401


def load_dataset(name, size="small", test_with_fake_data=False):
    """load_dataset("mnist") reads ./MNIST-data (Debian's Fashion-MNIST when
    that directory has no data set: nothing is downloaded)."""
    if name != "mnist":
        raise ValueError(f"Name of dataset is unknown {name}: distflow has 'mnist' only")
    return mnist.load_mnist()
