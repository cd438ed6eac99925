"""tf.keras.datasets: mnist and fashion_mnist, read from files on this
machine (nothing is downloaded)."""
from distflow.keras.datasets import fashion_mnist, mnist  # noqa: F401
