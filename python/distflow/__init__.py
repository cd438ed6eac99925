"""distflow: a distributed training runtime (C++), with a TensorFlow 1.x
style Python client.

    import distflow.compat.v1 as tf

Graph construction, shape inference, gradients, sessions and servers run in
C++ (distflow._distflow); this package converts at the boundary.
"""
from distflow import _distflow

__version__ = _distflow.version()
