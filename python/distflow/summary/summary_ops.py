"""The summary ops of tf.summary, with TensorFlow 1.x's naming: a summary
named "loss" made inside name_scope("train") is the op "train/loss" (or
"train/loss_1" for the second), and its tag is that same scoped name, with
the family prepended when one is given ("family/train/loss"). Each op
outputs a scalar string, a serialized Summary, and is added to the graph
collections given (default: GraphKeys.SUMMARIES, "summaries")."""
import re

from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow.graph_keys import GraphKeys
from distflow.proto import summary_pb2

_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name):
    """Characters TensorBoard does not take in a tag become "_"; a leading
    "/" is dropped (TensorFlow's clean_tag)."""
    if name is None:
        return None
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    return new_name


class _SummaryScope:
    """The op name and tag of a new summary (TensorFlow's summary_scope)."""

    def __init__(self, kind, name, family):
        if not isinstance(name, str) or not name:
            raise ValueError(f"tf.summary.{kind}: the name must be a non-empty string, got {name!r}")
        self.graph = _fw.get_default_graph()
        name, family = _clean_tag(name), _clean_tag(family)
        base = name if family is None else f"{family}/{name}"
        prefix = "/".join(self.graph._name_stack)
        self.op_name = self.graph._unique_name(f"{prefix}/{base}" if prefix else base)
        self.tag = self.op_name if family is None else f"{family}/{self.op_name}"
        self.kind, self.name = kind, name

    def _in_scope(self, fn):
        # Helper nodes (the tag's Const) go under the summary's own name.
        g = self.graph
        saved, g._name_stack = g._name_stack, [self.op_name]
        try:
            return fn()
        finally:
            g._name_stack = saved

    def constant(self, value, name):
        return self._in_scope(lambda: _fw.constant(value, dtype=_dtypes.string, name=name))

    def add(self, op_type, inputs, attrs=None):
        """Adds the summary op, named exactly op_name (already unique)."""
        g = self.graph
        saved, g._name_stack = g._name_stack, []
        try:
            s = g._scope()  # devices and control dependencies, no name prefix
        finally:
            g._name_stack = saved
        cc_inputs = []
        for x in inputs:
            for e in (x if isinstance(x, (list, tuple)) else [x]):
                t = _fw.convert_to_tensor(e)
                if t._out.graph_key != g.graph_key:
                    raise ValueError(f"tf.summary.{self.kind} '{self.name}': tensor '{t.name}' is from another graph")
                cc_inputs.append(t._out)
        try:
            cc_op = _distflow.add_op(s.with_op_name(self.op_name), op_type, cc_inputs, attrs or {})
        except _distflow.Error as e:
            raise type(e)(f"tf.summary.{self.kind} '{self.name}': {e}") from None
        return _fw.Tensor(_distflow.Output(cc_op, 0, g._root), g)


def _collect(value, collections, default):
    g = _fw.get_default_graph()
    for key in (default if collections is None else collections):
        g.add_to_collection(key, value)
    return value


def _numeric(kind, name, tensor):
    t = _fw.convert_to_tensor(tensor)
    if t.dtype.base_dtype not in (_dtypes.float32, _dtypes.float64, _dtypes.int32, _dtypes.int64, _dtypes.uint8):
        raise TypeError(f"tf.summary.{kind} '{name}': needs a real numeric tensor, got {t.dtype.name}")
    return t


def scalar(name, tensor, collections=None, family=None):
    """A Summary with one simple_value: the value of the scalar `tensor`."""
    t = _numeric("scalar", name, tensor)
    shape = t.shape
    if shape.ndims is not None and shape.ndims != 0:
        raise ValueError(f"tf.summary.scalar '{name}': the tensor must be a scalar, got shape {shape.as_list()} "
                         f"(summarize one element, or reduce it first, e.g. tf.reduce_mean)")
    sc = _SummaryScope("scalar", name, family)
    tag = sc.constant(sc.tag, "tags")
    return _collect(sc.add("ScalarSummary", [tag, t]), collections, [GraphKeys.SUMMARIES])


def histogram(name, values, collections=None, family=None):
    """A Summary with a histogram (HistogramProto) of all elements of
    `values`, in TensorFlow's default buckets. NaN or Inf fails the step."""
    t = _numeric("histogram", name, values)
    sc = _SummaryScope("histogram", name, family)
    tag = sc.constant(sc.tag, "tag")
    return _collect(sc.add("HistogramSummary", [tag, t]), collections, [GraphKeys.SUMMARIES])


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """Up to max_outputs PNG images from a [batch, height, width, channels]
    tensor (channels 1, 3 or 4; uint8, or floats scaled as TensorFlow does).
    Tags "<tag>/image" (max_outputs 1) or "<tag>/image/<i>"."""
    t = _fw.convert_to_tensor(tensor)
    if t.dtype.base_dtype not in (_dtypes.uint8, _dtypes.float32, _dtypes.float64):
        raise TypeError(f"tf.summary.image '{name}': images are uint8 or float, got {t.dtype.name}")
    shape = t.shape
    if shape.ndims is not None and (shape.ndims != 4 or shape.as_list()[3] not in (None, 1, 3, 4)):
        raise ValueError(f"tf.summary.image '{name}': the tensor must be [batch, height, width, channels] "
                         f"with 1, 3 or 4 channels, got shape {shape.as_list()}")
    if int(max_outputs) < 1:
        raise ValueError(f"tf.summary.image '{name}': max_outputs must be at least 1, got {max_outputs}")
    sc = _SummaryScope("image", name, family)
    tag = sc.constant(sc.tag, "tag")
    return _collect(sc.add("ImageSummary", [tag, t], {"max_images": int(max_outputs)}), collections,
                    [GraphKeys.SUMMARIES])


def tensor_summary(name, tensor, summary_description=None, collections=None, summary_metadata=None,
                   family=None, display_name=None):
    """A Summary holding `tensor` itself (TensorProto), with plugin metadata."""
    if summary_metadata is None:
        summary_metadata = summary_pb2.SummaryMetadata()
    if summary_description is not None:
        summary_metadata.summary_description = summary_description
    if display_name is not None:
        summary_metadata.display_name = display_name
    t = _fw.convert_to_tensor(tensor)
    sc = _SummaryScope("tensor_summary", name, family)
    tag = sc.constant(sc.tag, "tag")
    meta = sc.constant(summary_metadata.SerializeToString(), "serialized_summary_metadata")
    return _collect(sc.add("TensorSummaryV2", [tag, t, meta]), collections, [GraphKeys.SUMMARIES])


def text(name, tensor, collections=None):
    """A Summary of a string tensor for TensorBoard's text plugin."""
    t = _fw.convert_to_tensor(tensor)
    if t.dtype.base_dtype != _dtypes.string:
        raise ValueError(f"tf.summary.text '{name}': expected a string tensor, got {t.dtype.name}")
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name, t, summary_metadata=meta, collections=collections)


def merge(inputs, collections=None, name=None):
    """One Summary with the values of all `inputs` (summary tensors); a tag
    that appears twice fails the step."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("tf.summary.merge: needs at least one summary")
    for t in inputs:
        if not isinstance(t, _fw.Tensor) or t.dtype.base_dtype != _dtypes.string:
            raise TypeError(f"tf.summary.merge: inputs must be summary (string) tensors, got {t!r}")
    merged = _fw._apply("MergeSummary", [inputs], name=name or "Merge/MergeSummary")
    return _collect(merged, collections, [])


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """merge() of every summary in collection `key` (whose names match the
    regular expression `scope`, if given), or None if there is none."""
    summaries = _fw.get_default_graph().get_collection(key)
    if scope is not None:
        summaries = [s for s in summaries if re.match(scope, s.name)]
    if not summaries:
        return None
    return merge(summaries, name=name)
