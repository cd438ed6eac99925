// Neural-network ops (TensorFlow 1.x names and semantics): Conv2D and its
// backprops, pooling and its grads, BiasAdd, activations and their grads,
// softmax, cross-entropy losses, L2Loss and Dropout. Images are NHWC only.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/window.h"

namespace distflow {
namespace {

std::string IntsStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&s, i ? "," : "", v[i]);
  return s + "]";
}

// The windowed output size (graph/window.h); -1 if `in` or `k` is unknown.
absl::StatusOr<int64_t> OutSize(int64_t in, int64_t k, int64_t s, bool same, const char* what) {
  if (in < 0 || k < 0) return int64_t{-1};
  ASSIGN_OR_RETURN(WindowDim d, ComputeWindow(in, k, s, same, what));
  return d.out;
}

absl::Status Conv2DShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(WindowAttrs a, ReadWindowAttrs(c->node(), false));
  ASSIGN_OR_RETURN(PartialShape in, c->WithRank(c->input(0), 4, "input"));
  ASSIGN_OR_RETURN(PartialShape f, c->WithRank(c->input(1), 4, "filter"));
  if (in.dim(3) >= 0 && f.dim(2) >= 0 && in.dim(3) != f.dim(2)) {
    return absl::InvalidArgumentError(absl::StrCat("input depth must equal filter in-channels: input ",
                                                   in.DebugString(), " has ", in.dim(3), " channels, filter ",
                                                   f.DebugString(), " has ", f.dim(2)));
  }
  ASSIGN_OR_RETURN(int64_t oh, OutSize(in.dim(1), f.dim(0), a.sh, a.same, "filter"));
  ASSIGN_OR_RETURN(int64_t ow, OutSize(in.dim(2), f.dim(1), a.sw, a.same, "filter"));
  c->set_output(0, PartialShape({in.dim(0), oh, ow, f.dim(3)}));
  return absl::OkStatus();
}

// Output 0 is the 4-vector value of constant input `i` when known.
absl::Status ShapeFromSizesInput(InferenceContext* c, int i, const char* what) {
  RETURN_IF_ERROR(c->WithRank(c->input(i), 1, what).status());
  std::vector<int64_t> v;
  if (c->ConstantInputAsInts(i, &v)) {
    if (v.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(what, " must have 4 elements, got ", IntsStr(v)));
    }
    c->set_output(0, PartialShape(absl::Span<const int64_t>(v)));
  } else {
    c->set_output(0, PartialShape::UnknownOfRank(4));
  }
  return absl::OkStatus();
}

absl::Status Conv2DBackpropInputShape(InferenceContext* c) {
  RETURN_IF_ERROR(ReadWindowAttrs(c->node(), false).status());
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, "filter").status());
  RETURN_IF_ERROR(c->WithRank(c->input(2), 4, "out_backprop").status());
  return ShapeFromSizesInput(c, 0, "input_sizes");
}

absl::Status Conv2DBackpropFilterShape(InferenceContext* c) {
  RETURN_IF_ERROR(ReadWindowAttrs(c->node(), false).status());
  RETURN_IF_ERROR(c->WithRank(c->input(0), 4, "input").status());
  RETURN_IF_ERROR(c->WithRank(c->input(2), 4, "out_backprop").status());
  return ShapeFromSizesInput(c, 1, "filter_sizes");
}

absl::Status PoolShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(WindowAttrs a, ReadWindowAttrs(c->node(), true));
  ASSIGN_OR_RETURN(PartialShape in, c->WithRank(c->input(0), 4, "input"));
  ASSIGN_OR_RETURN(int64_t oh, OutSize(in.dim(1), a.kh, a.sh, a.same, "pooling"));
  ASSIGN_OR_RETURN(int64_t ow, OutSize(in.dim(2), a.kw, a.sw, a.same, "pooling"));
  c->set_output(0, PartialShape({in.dim(0), oh, ow, in.dim(3)}));
  return absl::OkStatus();
}

absl::Status MaxPoolGradShape(InferenceContext* c) {
  RETURN_IF_ERROR(ReadWindowAttrs(c->node(), true).status());
  ASSIGN_OR_RETURN(PartialShape in, c->WithRank(c->input(0), 4, "orig_input"));
  ASSIGN_OR_RETURN(PartialShape o, c->WithRank(c->input(1), 4, "orig_output"));
  ASSIGN_OR_RETURN(PartialShape g, c->WithRank(c->input(2), 4, "grad"));
  if (!o.Merge(g).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("orig_output ", o.DebugString(), " and grad ", g.DebugString(), " must have the same shape"));
  }
  c->set_output(0, in);
  return absl::OkStatus();
}

absl::Status AvgPoolGradShape(InferenceContext* c) {
  RETURN_IF_ERROR(ReadWindowAttrs(c->node(), true).status());
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, "grad").status());
  return ShapeFromSizesInput(c, 0, "orig_input_shape");
}

absl::Status BiasAddShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape v, c->WithRankAtLeast(c->input(0), 2, "value"));
  ASSIGN_OR_RETURN(PartialShape b, c->WithRank(c->input(1), 1, "bias"));
  if (HasAttr(c->node(), "data_format")) {
    ASSIGN_OR_RETURN(std::string fmt, GetAttrString(c->node(), "data_format"));
    if (fmt != "NHWC") {
      return absl::InvalidArgumentError(
          absl::StrCat("data_format '", fmt, "' is not supported: only NHWC is implemented"));
    }
  }
  if (v.unknown_rank()) {
    c->set_output(0, v);
    return absl::OkStatus();
  }
  const int last = v.rank() - 1;
  const int64_t vc = v.dim(last), bc = b.dim(0);
  if (vc >= 0 && bc >= 0 && vc != bc) {
    return absl::InvalidArgumentError(absl::StrCat("Must provide as many biases as the last dimension of value: value ",
                                                   v.DebugString(), ", bias ", b.DebugString()));
  }
  std::vector<int64_t> dims(v.dims().begin(), v.dims().end());
  if (dims[static_cast<size_t>(last)] < 0) dims[static_cast<size_t>(last)] = bc;
  c->set_output(0, PartialShape(absl::Span<const int64_t>(dims)));
  return absl::OkStatus();
}

absl::Status BiasAddGradShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape v, c->WithRankAtLeast(c->input(0), 2, "out_backprop"));
  c->set_output(0, v.unknown_rank() ? PartialShape::UnknownOfRank(1) : PartialShape({v.dim(v.rank() - 1)}));
  return absl::OkStatus();
}

absl::Status SoftmaxShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape v, c->WithRankAtLeast(c->input(0), 1, "logits"));
  c->set_output(0, v);
  return absl::OkStatus();
}

absl::Status XentShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape f, c->WithRank(c->input(0), 2, "features"));
  ASSIGN_OR_RETURN(PartialShape l, c->WithRank(c->input(1), 2, "labels"));
  absl::StatusOr<PartialShape> m = f.Merge(l);
  if (!m.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("logits and labels must be the same size: logits ", f.DebugString(),
                                                   ", labels ", l.DebugString()));
  }
  c->set_output(0, PartialShape({m->dim(0)}));
  c->set_output(1, *m);
  return absl::OkStatus();
}

absl::Status SparseXentShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape f, c->WithRank(c->input(0), 2, "features"));
  ASSIGN_OR_RETURN(PartialShape l, c->WithRank(c->input(1), 1, "labels"));
  absl::StatusOr<int64_t> b = c->MergeDim(f.dim(0), l.dim(0), "batch size of logits and labels");
  if (!b.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("logits and labels must have the same first dimension: logits ",
                                                   f.DebugString(), ", labels ", l.DebugString()));
  }
  c->set_output(0, PartialShape({*b}));
  c->set_output(1, PartialShape({*b, f.dim(1)}));
  return absl::OkStatus();
}

absl::Status DropoutShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, "keep_prob").status());
  c->set_output(0, c->input(0));
  c->set_output(1, c->input(0));
  return absl::OkStatus();
}

}  // namespace

void RegisterNnOps(OpRegistry* r) {
  const char* kFloatTypes = "T: {float, double}";

  r->MustRegister(OpDefBuilder("Conv2D")
                      .Input("input: T")
                      .Input("filter: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("strides: list(int)")
                      .Attr("padding: string")
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(Conv2DShape));
  r->MustRegister(OpDefBuilder("Conv2DBackpropInput")
                      .Input("input_sizes: int32")
                      .Input("filter: T")
                      .Input("out_backprop: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("strides: list(int)")
                      .Attr("padding: string")
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(Conv2DBackpropInputShape));
  r->MustRegister(OpDefBuilder("Conv2DBackpropFilter")
                      .Input("input: T")
                      .Input("filter_sizes: int32")
                      .Input("out_backprop: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("strides: list(int)")
                      .Attr("padding: string")
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(Conv2DBackpropFilterShape));

  for (const char* op : {"MaxPool", "AvgPool"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("value: T")
                        .Output("output: T")
                        .Attr(kFloatTypes)
                        .Attr("ksize: list(int)")
                        .Attr("strides: list(int)")
                        .Attr("padding: string")
                        .Attr("data_format: string = 'NHWC'")
                        .SetShapeFn(PoolShape));
  }
  r->MustRegister(OpDefBuilder("MaxPoolGrad")
                      .Input("orig_input: T")
                      .Input("orig_output: T")
                      .Input("grad: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("ksize: list(int)")
                      .Attr("strides: list(int)")
                      .Attr("padding: string")
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(MaxPoolGradShape));
  r->MustRegister(OpDefBuilder("AvgPoolGrad")
                      .Input("orig_input_shape: int32")
                      .Input("grad: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("ksize: list(int)")
                      .Attr("strides: list(int)")
                      .Attr("padding: string")
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(AvgPoolGradShape));

  r->MustRegister(OpDefBuilder("BiasAdd")
                      .Input("value: T")
                      .Input("bias: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(BiasAddShape));
  r->MustRegister(OpDefBuilder("BiasAddGrad")
                      .Input("out_backprop: T")
                      .Output("output: T")
                      .Attr(kFloatTypes)
                      .Attr("data_format: string = 'NHWC'")
                      .SetShapeFn(BiasAddGradShape));

  for (const char* op : {"Relu", "Relu6", "Elu", "Sigmoid", "Tanh", "Softplus"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input(std::string(op) == "Sigmoid" || std::string(op) == "Tanh" ? "x: T" : "features: T")
                        .Output(std::string(op) == "Sigmoid" || std::string(op) == "Tanh" ? "y: T" : "activations: T")
                        .Attr(kFloatTypes)
                        .SetShapeFn(UnchangedShape));
  }
  struct GradSpec {
    const char* op;
    const char* a;
    const char* b;
  };
  for (const GradSpec& g :
       {GradSpec{"ReluGrad", "gradients", "features"}, GradSpec{"Relu6Grad", "gradients", "features"},
        GradSpec{"EluGrad", "gradients", "outputs"}, GradSpec{"SigmoidGrad", "y", "dy"},
        GradSpec{"TanhGrad", "y", "dy"}, GradSpec{"SoftplusGrad", "gradients", "features"}}) {
    const bool yz = std::string(g.op) == "SigmoidGrad" || std::string(g.op) == "TanhGrad";
    r->MustRegister(OpDefBuilder(g.op)
                        .Input(absl::StrCat(g.a, ": T"))
                        .Input(absl::StrCat(g.b, ": T"))
                        .Output(yz ? "z: T" : "backprops: T")
                        .Attr(kFloatTypes)
                        .SetShapeFn(MergeAllInputsShape));
  }

  for (const char* op : {"Softmax", "LogSoftmax"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("logits: T")
                        .Output(std::string(op) == "Softmax" ? "softmax: T" : "logsoftmax: T")
                        .Attr(kFloatTypes)
                        .SetShapeFn(SoftmaxShape));
  }
  r->MustRegister(OpDefBuilder("SoftmaxCrossEntropyWithLogits")
                      .Input("features: T")
                      .Input("labels: T")
                      .Output("loss: T")
                      .Output("backprop: T")
                      .Attr(kFloatTypes)
                      .SetShapeFn(XentShape));
  r->MustRegister(OpDefBuilder("SparseSoftmaxCrossEntropyWithLogits")
                      .Input("features: T")
                      .Input("labels: Tlabels")
                      .Output("loss: T")
                      .Output("backprop: T")
                      .Attr(kFloatTypes)
                      .Attr("Tlabels: {int32, int64} = int64")
                      .SetShapeFn(SparseXentShape));
  r->MustRegister(OpDefBuilder("L2Loss").Input("t: T").Output("output: T").Attr(kFloatTypes).SetShapeFn(ScalarShape));
  r->MustRegister(OpDefBuilder("Dropout")
                      .Input("x: T")
                      .Input("keep_prob: T")
                      .Output("output: T")
                      .Output("mask: T")
                      .Attr(kFloatTypes)
                      .Attr("seed: int = 0")
                      .Attr("seed2: int = 0")
                      .SetIsStateful()
                      .SetShapeFn(DropoutShape));
  // Dropout with a mask already drawn (a Dropout's `mask` output): output =
  // x * mask, and the mask again. A while loop's gradient rebuilds a body's
  // Dropout as this, on the mask the forward loop drew (client/scope.cc).
  r->MustRegister(OpDefBuilder("DropoutMasked")
                      .Input("x: T")
                      .Input("keep_prob: T")
                      .Input("drawn_mask: T")
                      .Output("output: T")
                      .Output("mask: T")
                      .Attr(kFloatTypes)
                      .SetShapeFn(DropoutShape));
}

}  // namespace distflow
