"""TF-slim's layers, as the book's program calls them:
slim.layers.conv2d(x, 32, [5, 5], scope='conv1'), max_pool2d, flatten,
fully_connected(x, 10, activation_fn=None, scope='pred'). Built in C++
(train/layers.h): weights Glorot-uniform, biases zero, variables named
<scope>/weights and <scope>/biases, placed by the enclosing tf.device."""
import types

from distflow import _distflow
from distflow import framework as _fw

_RELU = object()  # the default activation


def _activation(fn):
    if fn is _RELU or getattr(fn, "_is_relu", False):
        return True
    if fn is None:
        return False
    raise NotImplementedError("slim layers take activation_fn=tf.nn.relu (the default) or None for now")


def _single(v):
    return [v, v] if isinstance(v, int) else list(v)


def _build(builder, x, *args, **kwargs):
    g = _fw.get_default_graph()
    x = _fw._checked(g, _fw.convert_to_tensor(x))
    return _fw.Tensor(builder(g._scope(), x._out, *args, **kwargs), g)


def conv2d(inputs, num_outputs, kernel_size, stride=1, padding="SAME", activation_fn=_RELU, scope=None):
    return _build(_distflow.layers.conv2d, inputs, num_outputs, _single(kernel_size), stride, padding,
                  _activation(activation_fn), scope or "Conv")


def max_pool2d(inputs, kernel_size, stride=2, padding="VALID", scope=None):
    return _build(_distflow.layers.max_pool2d, inputs, _single(kernel_size), stride, padding, scope or "")


def flatten(inputs, scope=None):
    return _build(_distflow.layers.flatten, inputs, scope or "")


def fully_connected(inputs, num_outputs, activation_fn=_RELU, scope=None):
    return _build(_distflow.layers.fully_connected, inputs, num_outputs, _activation(activation_fn),
                  scope or "fully_connected")


layers = types.SimpleNamespace(conv2d=conv2d, max_pool2d=max_pool2d, flatten=flatten,
                               fully_connected=fully_connected)
