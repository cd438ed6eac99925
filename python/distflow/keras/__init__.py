"""The parts of tf.keras that TF1 programs use outside Keras models:
datasets (mnist, fashion_mnist)."""
from distflow.keras import datasets  # noqa: F401
