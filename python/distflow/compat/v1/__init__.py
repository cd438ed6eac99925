"""TensorFlow 1.x's API over distflow:

    import distflow.compat.v1 as tf

What the seed programs use is here, with TF1 semantics; anything else of
TensorFlow raises NotImplementedError naming it (never an AttributeError
deep inside)."""
import sys as _sys
import types as _types

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
import_graph_def = _fw.import_graph_def
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
GPUOptions = _fw.GPUOptions  # accepted and ignored (no GPU devices)
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


# math (distflow/math_ops.py)
from distflow.math_ops import (  # noqa: E402,F401
    abs, accumulate_n, add, add_n, arg_max, arg_min, argmax, argmin, cast, ceil, clip_by_global_norm, clip_by_norm, clip_by_value,
    cos, count_nonzero, is_finite, is_inf, is_nan, div, divide, equal, exp, expm1, floor, floordiv, global_norm, greater, greater_equal, log,
    log1p, logical_and, logical_not, logical_or, logical_xor, less, less_equal, matmul, maximum, minimum, mul,
    multiply, neg, negative, not_equal, pow, realdiv, reciprocal, reduce_all, reduce_any, reduce_logsumexp,
    reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, round, rsqrt, saturate_cast, scalar_mul, sign,
    sin, sqrt, square, squared_difference, sub, subtract, tanh, sigmoid, to_double, to_float, to_int32, to_int64,
    tensordot, truediv)
# arrays (distflow/array_ops.py)
from distflow.array_ops import (  # noqa: E402,F401
    concat, expand_dims, eye, fill, identity, lin_space, linspace, newaxis, one_hot, ones, ones_like, pack, pad,
    range, rank, reshape, reverse, reverse_v2, sequence_mask, shape, size, slice, split, squeeze, stack,
    stop_gradient, strided_slice, tile, transpose, unpack, unstack, where, zeros, zeros_like)
# control flow (distflow/control_flow_ops.py, tensor_array_ops.py)
from distflow.control_flow_ops import Assert, case, cond, while_loop  # noqa: E402,F401
from distflow.tensor_array_ops import TensorArray  # noqa: E402,F401
# random (distflow/random_ops.py)
from distflow.random_ops import random_normal, random_uniform, set_random_seed, truncated_normal  # noqa: E402,F401
from distflow import nn  # noqa: E402,F401  (tf.nn, a module)
# sparse models (distflow/sparse_ops.py): lookups, scatters, segments, IndexedSlices
from distflow import sparse_ops as _sparse  # noqa: E402
from distflow.sparse_ops import (  # noqa: E402,F401
    IndexedSlices, dynamic_partition, dynamic_stitch, gather, gather_nd, scatter_add, scatter_nd, scatter_nd_add,
    scatter_nd_update, scatter_sub, scatter_update, sparse_segment_mean, sparse_segment_sum,
    tensor_scatter_nd_update, tensor_scatter_update, unique, unsorted_segment_sum)
from distflow.partitioned_variables import (  # noqa: E402,F401
    PartitionedVariable, fixed_size_partitioner, min_max_variable_partitioner, variable_axis_size_partitioner)


def no_op(name=None): return _fw._apply("NoOp", [], name=name)


def assign(ref, value, validate_shape=None, use_locking=None, name=None): return ref.assign(value, name=name)
def assign_add(ref, value, use_locking=None, name=None): return ref.assign_add(value, name=name)
def assign_sub(ref, value, use_locking=None, name=None): return ref.assign_sub(value, name=name)


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, stop_gradients=None):
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    single = not isinstance(xs, (list, tuple))
    xs = [xs] if single else list(xs)
    if grad_ys is not None and not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    g = get_default_graph()
    outs = _distflow.gradients(g._scope(), [convert_to_tensor(y)._out for y in ys], [x._out for x in xs],
                               [convert_to_tensor(t)._out for t in (grad_ys or [])])
    # An x that no y depends on gets None, as in TensorFlow; a lookup's
    # gradient is an IndexedSlices.
    return [_sparse._wrap_gradient(o, g) if o.ok else None for o in outs]


class _Namespace(_types.SimpleNamespace):
    def __init__(self, prefix, **kwargs):
        super().__init__(**kwargs)
        self._prefix = prefix

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"distflow.compat.v1 has no tf.{self._prefix}.{name} yet")


class _Module(_types.ModuleType):
    """A TF1 module (tf.train, tf.layers, ...) served by a distflow module:
    its public names, and a clear NotImplementedError for the others."""

    def __init__(self, prefix, module, **extra):
        super().__init__(f"{__name__}.{prefix}")
        self._prefix, self._module, self._extra = prefix, module, extra

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._extra:
            return self._extra[name]
        value = getattr(self._module, name, None)
        if value is None:
            raise NotImplementedError(f"distflow.compat.v1 has no tf.{self._prefix}.{name} yet")
        return value

    def __dir__(self):
        return sorted(set(self._extra) | {n for n in dir(self._module) if not n.startswith("_")})


from distflow import gfile  # noqa: E402 (tf.gfile)
from distflow import layers as _layers  # noqa: E402
from distflow import logging  # noqa: E402,A004 (tf.logging)
from distflow import losses as _losses  # noqa: E402
from distflow import metrics as _metrics  # noqa: E402

from distflow import contrib as _contrib  # noqa: E402

contrib = _Module("contrib", _contrib)

from distflow import keras as _keras  # noqa: E402

# tf.keras: its datasets only (mnist, fashion_mnist, read from this machine).
keras = _Module("keras", _keras, datasets=_Module("keras.datasets", _keras.datasets))
train = _Module("train", _train)
layers = _Module("layers", _layers)
losses = _Module("losses", _losses)
metrics = _Module("metrics", _metrics)
flags = app.flags

# collections and variables
GraphKeys = _fw.GraphKeys
add_to_collection = _fw.add_to_collection
add_to_collections = _fw.add_to_collections
get_collection = _fw.get_collection
get_collection_ref = _fw.get_collection_ref
global_variables = _fw.global_variables
all_variables = _fw.all_variables
local_variables = _fw.local_variables
model_variables = _fw.model_variables
moving_average_variables = _fw.moving_average_variables
local_variables_initializer = _fw.local_variables_initializer
initialize_local_variables = _fw.initialize_local_variables
variables_initializer = _fw.variables_initializer
is_variable_initialized = _fw.is_variable_initialized
tables_initializer = _fw.tables_initializer
get_variable_scope = _fw.get_variable_scope
VariableScope = _fw.VariableScope
AUTO_REUSE = _fw.AUTO_REUSE
RunOptions = _fw.RunOptions
RunMetadata = _fw.RunMetadata
placeholder_with_default = _fw.placeholder_with_default



# tf.summary (a module), the summary protos and hooks, graph collections
from distflow import summary  # noqa: E402
from distflow import summary_hooks as _summary_hooks  # noqa: E402
Summary, SummaryMetadata, HistogramProto = summary.Summary, summary.SummaryMetadata, summary.HistogramProto
Event, SessionLog, LogMessage, TaggedRunMetadata = summary.Event, summary.SessionLog, summary.LogMessage, \
    summary.TaggedRunMetadata
train.SummarySaverHook = _summary_hooks.SummarySaverHook
train.StepCounterHook = _summary_hooks.StepCounterHook
train.SecondOrStepTimer = _summary_hooks.SecondOrStepTimer
train.SummaryWriter = summary.FileWriter
train.SummaryWriterCache = summary.FileWriterCache


# tf.data (distflow/data): datasets and iterators run by the C++ runtime
from distflow import data as _data  # noqa: E402
data = _Module("data", _data)


# ---- RNNs (distflow/rnn.py) -------------------------------------------------
# tf.nn.rnn_cell (the cells), tf.nn.static_rnn / dynamic_rnn /
# static_bidirectional_rnn / bidirectional_dynamic_rnn, and tf.contrib.rnn are
# served by the nn and contrib modules above (no top-level tf.* names):
from distflow import rnn as _rnn  # noqa: E402,F401
# ---- end RNNs ----------------------------------------------------------------


# tf.estimator (distflow/estimator): Estimator, RunConfig, train_and_evaluate
from distflow import estimator as _estimator  # noqa: E402
estimator = _Module("estimator", _estimator)


# ---- queues, readers, parsing, tf.python_io and tf.image (TF1 input pipelines) ----
from distflow import data_flow_ops as _data_flow_ops  # noqa: E402
from distflow import image_ops as _image_ops  # noqa: E402
from distflow import parsing_ops as _parsing_ops  # noqa: E402
from distflow import python_io  # noqa: E402,F401 (tf.python_io)
QueueBase, FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue = (
    _data_flow_ops.QueueBase, _data_flow_ops.FIFOQueue, _data_flow_ops.PaddingFIFOQueue,
    _data_flow_ops.RandomShuffleQueue)
ReaderBase, TFRecordReader, FixedLengthRecordReader, WholeFileReader, TextLineReader = (
    _data_flow_ops.ReaderBase, _data_flow_ops.TFRecordReader, _data_flow_ops.FixedLengthRecordReader,
    _data_flow_ops.WholeFileReader, _data_flow_ops.TextLineReader)
decode_raw, parse_example, parse_single_example = (
    _parsing_ops.decode_raw, _parsing_ops.parse_example, _parsing_ops.parse_single_example)
FixedLenFeature, VarLenFeature = _parsing_ops.FixedLenFeature, _parsing_ops.VarLenFeature
SparseTensor, SparseTensorValue = _parsing_ops.SparseTensor, _parsing_ops.SparseTensorValue
random_crop = _image_ops.random_crop
image = _Module("image", _image_ops)
# ---- end of the input-pipeline names ----


class _NotImplementedNamespace(_types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"distflow.compat.v1 has no tf.{name} yet")


# Unknown names: a clear NotImplementedError naming what is missing.
_sys.modules[__name__].__class__ = _NotImplementedNamespace
