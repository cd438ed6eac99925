"""Compatibility namespaces: distflow.compat.v1 is TensorFlow 1.x's API."""
