"""TensorFlow 1.x's API over distflow:

    import distflow.compat.v1 as tf

What the seed programs use is here, with TF1 semantics; anything else of
TensorFlow raises NotImplementedError naming it (never an AttributeError
deep inside)."""
import builtins as _builtins
import sys as _sys
import types as _types

import numpy as _np

from distflow import dtypes as _dtypes
from distflow import errors  # noqa: F401 (tf.errors)
from distflow import framework as _fw
from distflow import raw_ops  # noqa: F401 (tf.raw_ops)
from distflow import train as _train
from distflow import _distflow
from distflow import app  # noqa: F401 (tf.app)

# dtypes
DType = _dtypes.DType
as_dtype = _dtypes.as_dtype
float32, float64, int32, int64 = _dtypes.float32, _dtypes.float64, _dtypes.int32, _dtypes.int64
uint8, bool, string = _dtypes.uint8, _dtypes.bool, _dtypes.string  # noqa: A001
double = _dtypes.float64

# graphs, tensors, sessions
Graph = _fw.Graph
Tensor = _fw.Tensor
Operation = _fw.Operation
TensorShape = _fw.TensorShape
get_default_graph = _fw.get_default_graph
reset_default_graph = _fw.reset_default_graph
device = _fw.device
name_scope = _fw.name_scope
control_dependencies = _fw.control_dependencies
convert_to_tensor = _fw.convert_to_tensor
constant = _fw.constant
placeholder = _fw.placeholder
Variable = _fw.Variable
global_variables_initializer = _fw.global_variables_initializer
initialize_all_variables = _fw.initialize_all_variables
trainable_variables = _fw.trainable_variables
group = _fw.group
Session = _fw.Session
InteractiveSession = _fw.InteractiveSession
ConfigProto = _fw.ConfigProto
get_default_session = _fw.get_default_session
get_variable = _fw.get_variable
variable_scope = _fw.variable_scope
constant_initializer = _fw.constant_initializer
zeros_initializer = _fw.zeros_initializer
ones_initializer = _fw.ones_initializer
random_normal_initializer = _fw.random_normal_initializer
truncated_normal_initializer = _fw.truncated_normal_initializer
random_uniform_initializer = _fw.random_uniform_initializer
glorot_uniform_initializer = _fw.glorot_uniform_initializer


def _op(name):
    return getattr(raw_ops, name)


def _axes(axis, reduction_indices, x):
    axis = axis if axis is not None else reduction_indices
    if axis is None:
        rank = x.shape.ndims
        if rank is None:
            raise NotImplementedError("reducing over all axes of a tensor of unknown rank")
        return list(range(rank))
    return [axis] if isinstance(axis, int) else list(axis)


def _reduce(op_name):
    def reduce_fn(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None):
        x = convert_to_tensor(input_tensor)
        keep = _builtins.bool(keepdims if keepdims is not None else (keep_dims or False))
        return _op(op_name)(x, constant(_axes(axis, reduction_indices, x), dtype=int32), keep_dims=keep,
                            name=name)
    reduce_fn.__name__ = "reduce_" + op_name.lower()
    return reduce_fn


reduce_sum = _reduce("Sum")
reduce_mean = _reduce("Mean")
reduce_max = _reduce("Max")
reduce_min = _reduce("Min")
reduce_prod = _reduce("Prod")


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    return _op("MatMul")(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


def add(x, y, name=None): return _op("Add")(x, y, name=name)
def subtract(x, y, name=None): return _op("Sub")(x, y, name=name)
def multiply(x, y, name=None): return _op("Mul")(x, y, name=name)
def divide(x, y, name=None): return _op("Div")(x, y, name=name)
def equal(x, y, name=None): return _op("Equal")(x, y, name=name)
def square(x, name=None): return _op("Square")(x, name=name)
def sqrt(x, name=None): return _op("Sqrt")(x, name=name)
def exp(x, name=None): return _op("Exp")(x, name=name)
def log(x, name=None): return _op("Log")(x, name=name)
def identity(x, name=None): return _op("Identity")(x, name=name)
def add_n(inputs, name=None): return _op("AddN")(list(inputs), name=name)


mul, sub, div = multiply, subtract, divide


def assign(ref, value, validate_shape=None, use_locking=None, name=None): return ref.assign(value, name=name)
def assign_add(ref, value, use_locking=None, name=None): return ref.assign_add(value, name=name)
def assign_sub(ref, value, use_locking=None, name=None): return ref.assign_sub(value, name=name)


def cast(x, dtype, name=None):
    return _op("Cast")(x, DstT=as_dtype(dtype), name=name)


def argmax(input, axis=None, name=None, dimension=None, output_type=None):  # noqa: A002
    if output_type not in (None, int64):
        raise NotImplementedError("argmax output_type other than int64")
    axis = axis if axis is not None else (dimension if dimension is not None else 0)
    return _op("ArgMax")(input, constant(axis, dtype=int32), name=name)


def reshape(tensor, shape, name=None):
    return _op("Reshape")(tensor, constant(list(shape), dtype=int32) if not isinstance(shape, Tensor) else shape,
                          name=name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None, name=None):
    return _fw.truncated_normal_initializer(mean, stddev, seed)(list(shape), as_dtype(dtype))


def random_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None, name=None):
    return _fw.random_normal_initializer(mean, stddev, seed)(list(shape), as_dtype(dtype))


def random_uniform(shape, minval=0, maxval=None, dtype=float32, seed=None, name=None):
    return _fw.random_uniform_initializer(minval, 1.0 if maxval is None else maxval, seed)(list(shape),
                                                                                          as_dtype(dtype))


def fill(dims, value, name=None):
    return _op("Fill")(constant(list(dims), dtype=int32) if isinstance(dims, (list, tuple)) else dims, value,
                       name=name or "Fill")


def _filled(value, shape, dtype, name):
    # As TensorFlow does: a small tensor is a constant, a large one a Fill
    # computed where it is placed (a constant would be built here, whole).
    shape = list(shape)
    if len(shape) > 0 and all(isinstance(d, int) for d in shape) and _np.prod(shape, dtype=_np.int64) > 1000:
        return fill(shape, constant(value, dtype=dtype), name=name)
    return constant(value, dtype=dtype, shape=shape, name=name)


def zeros(shape, dtype=float32, name=None):
    return _filled(0, shape, dtype, name or "zeros")


def ones(shape, dtype=float32, name=None):
    return _filled(1, shape, dtype, name or "ones")


def gradients(ys, xs, grad_ys=None, name="gradients"):
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    single = not isinstance(xs, (list, tuple))
    xs = [xs] if single else list(xs)
    g = get_default_graph()
    outs = _distflow.gradients(g._scope(), [convert_to_tensor(y)._out for y in ys], [x._out for x in xs],
                               [convert_to_tensor(t)._out for t in (grad_ys or [])])
    return [_fw.Tensor(o, g) for o in outs]


# tf.nn
def _softmax_xent(_logits=None, _labels=None, dim=-1, name=None, labels=None, logits=None):
    """logits= and labels= (TensorFlow 1.x), or positional (logits, labels) as
    the book's TensorFlow 0.12 program passes them."""
    logits = logits if logits is not None else _logits
    labels = labels if labels is not None else _labels
    if logits is None or labels is None:
        raise ValueError("softmax_cross_entropy_with_logits needs logits and labels")
    logits = convert_to_tensor(logits)
    loss, _ = _op("SoftmaxCrossEntropyWithLogits")(logits, convert_to_tensor(labels, dtype=logits.dtype),
                                                   name=name)
    return loss


def _relu(features, name=None):
    return _op("Relu")(features, name=name)


_relu._is_relu = True  # slim's default activation


class _Namespace(_types.SimpleNamespace):
    def __init__(self, prefix, **kwargs):
        super().__init__(**kwargs)
        self._prefix = prefix

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"distflow.compat.v1 has no tf.{self._prefix}.{name} yet")


def _conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True, data_format="NHWC",  # noqa: A002
            dilations=None, name=None, filters=None):
    if data_format != "NHWC":
        raise NotImplementedError("conv2d data_format other than NHWC")
    w = filter if filter is not None else filters
    return _op("Conv2D")(input, w, strides=list(strides), padding=padding, name=name)


def _pool(op_name):
    def pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
        if data_format != "NHWC":
            raise NotImplementedError(f"{op_name} data_format other than NHWC")
        return _op(op_name)(value if value is not None else input, ksize=list(ksize), strides=list(strides),
                            padding=padding, name=name)
    return pool


nn = _Namespace("nn",
    relu=_relu,
    relu6=lambda features, name=None: _op("Relu6")(features, name=name),
    elu=lambda features, name=None: _op("Elu")(features, name=name),
    sigmoid=lambda x, name=None: _op("Sigmoid")(x, name=name),
    tanh=lambda x, name=None: _op("Tanh")(x, name=name),
    softplus=lambda features, name=None: _op("Softplus")(features, name=name),
    log_softmax=lambda logits, name=None: _op("LogSoftmax")(logits, name=name),
    conv2d=_conv2d,
    max_pool=_pool("MaxPool"),
    avg_pool=_pool("AvgPool"),
    softmax=lambda logits, name=None: _op("Softmax")(logits, name=name),
    softmax_cross_entropy_with_logits=_softmax_xent,
    bias_add=lambda value, bias, name=None: _op("BiasAdd")(value, bias, name=name),
)

# tf.train
train = _Namespace("train",
    ClusterSpec=_train.ClusterSpec,
    Server=_train.Server,
    replica_device_setter=_train.replica_device_setter,
    Optimizer=_train.Optimizer,
    GradientDescentOptimizer=_train.GradientDescentOptimizer,
    MomentumOptimizer=_train.MomentumOptimizer,
    AdagradOptimizer=_train.AdagradOptimizer,
    RMSPropOptimizer=_train.RMSPropOptimizer,
    AdamOptimizer=_train.AdamOptimizer,
    SyncReplicasOptimizer=_train.SyncReplicasOptimizer,
    Supervisor=_train.Supervisor,
    Saver=_train.Saver,
    latest_checkpoint=_train.latest_checkpoint,
    MonitoredTrainingSession=_train.MonitoredTrainingSession,
    StopAtStepHook=_train.StopAtStepHook,
    SessionRunHook=_train.SessionRunHook,
    SessionRunArgs=_train.SessionRunArgs,
    SessionRunContext=_train.SessionRunContext,
    SessionRunValues=_train.SessionRunValues,
    LoggingTensorHook=_train.LoggingTensorHook,
    NanTensorHook=_train.NanTensorHook,
    NanLossDuringTrainingError=_train.NanLossDuringTrainingError,
    FinalOpsHook=_train.FinalOpsHook,
    get_global_step=_train.get_global_step,
    get_or_create_global_step=_train.get_or_create_global_step,
    create_global_step=_train.create_global_step,
)
sigmoid = nn.sigmoid
tanh = nn.tanh


# tf.summary (a module), the summary protos and hooks, graph collections
from distflow import summary  # noqa: E402
from distflow import summary_hooks as _summary_hooks  # noqa: E402
from distflow.graph_keys import GraphKeys  # noqa: E402
Summary, SummaryMetadata, HistogramProto = summary.Summary, summary.SummaryMetadata, summary.HistogramProto
Event, SessionLog, LogMessage, TaggedRunMetadata = summary.Event, summary.SessionLog, summary.LogMessage, \
    summary.TaggedRunMetadata
train.SummarySaverHook = _summary_hooks.SummarySaverHook
train.StepCounterHook = _summary_hooks.StepCounterHook
train.SecondOrStepTimer = _summary_hooks.SecondOrStepTimer
train.SummaryWriter = summary.FileWriter
train.SummaryWriterCache = summary.FileWriterCache


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


class _NotImplementedNamespace(_types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"distflow.compat.v1 has no tf.{name} yet")


# Unknown names: a clear NotImplementedError naming what is missing.
_sys.modules[__name__].__class__ = _NotImplementedNamespace
