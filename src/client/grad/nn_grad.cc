// Gradients of the NN ops (TensorFlow's nn_grad.py). The ops live in
// graph/ops/nn_ops.cc; their names, inputs and attributes follow TensorFlow.
#include "absl/strings/str_cat.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

using grad::BuildLike;
using grad::Input;
using grad::Out;

using Grads = std::vector<Output>;

absl::Status Done(const Scope& s) { return s.status(); }

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

// Gradients with no entry for the inputs after the first.
void PadNone(const Operation& op, Grads* out) {
  while (static_cast<int>(out->size()) < op.node()->num_inputs()) out->push_back(Output());
}

// dx = OpGrad(g, x) (features-based activations).
GradFunc FeaturesGrad(const std::string& grad_op) {
  return [grad_op](const Scope& s, const Operation& op, const Grads& g, Grads* out) {
    *out = {BuildLike(s, grad_op, {g[0], Input(s, op, 0)}, op.node())};
    PadNone(op, out);
    return Done(s);
  };
}

GRAD_FN(EluGrad) {
  *out = {BuildLike(s, "EluGrad", {g[0], Out(s, op, 0)}, op.node())};
  return Done(s);
}
GRAD_FN(SigmoidGrad) {
  *out = {BuildLike(s, "SigmoidGrad", {Out(s, op, 0), g[0]}, op.node())};
  return Done(s);
}
GRAD_FN(TanhGrad) {
  *out = {BuildLike(s, "TanhGrad", {Out(s, op, 0), g[0]}, op.node())};
  return Done(s);
}

GRAD_FN(BiasAddGrad) {
  *out = {g[0], BuildLike(s, "BiasAddGrad", {g[0]}, op.node())};
  return Done(s);
}

GRAD_FN(Conv2DGrad) {
  Output input = Input(s, op, 0), filter = Input(s, op, 1);
  *out = {BuildLike(s, "Conv2DBackpropInput", {ops::Shape(s, input), filter, g[0]}, op.node()),
          BuildLike(s, "Conv2DBackpropFilter", {input, ops::Shape(s, filter), g[0]}, op.node())};
  return Done(s);
}

// Conv2DBackpropInput is tf.nn.conv2d_transpose: its input is the
// out_backprop, so a Conv2D of g gives that input's gradient.
GRAD_FN(Conv2DBackpropInputGrad) {
  Output filter = Input(s, op, 1), dy = Input(s, op, 2);
  *out = {Output(), BuildLike(s, "Conv2DBackpropFilter", {g[0], ops::Shape(s, filter), dy}, op.node()),
          BuildLike(s, "Conv2D", {g[0], filter}, op.node())};
  return Done(s);
}

GRAD_FN(MaxPoolGrad) {
  *out = {BuildLike(s, "MaxPoolGrad", {Input(s, op, 0), Out(s, op, 0), g[0]}, op.node())};
  return Done(s);
}

GRAD_FN(AvgPoolGrad) {
  *out = {BuildLike(s, "AvgPoolGrad", {ops::Shape(s, Input(s, op, 0)), g[0]}, op.node())};
  return Done(s);
}

GRAD_FN(SoftmaxGrad) {
  // dx = (g - sum(g * y, -1, keep_dims)) * y
  Output y = Out(s, op, 0);
  Output sum = ops::Sum(s, ops::Mul(s, g[0], y), {-1}, true);
  *out = {ops::Mul(s, ops::Sub(s, g[0], sum), y)};
  return Done(s);
}

GRAD_FN(LogSoftmaxGrad) {
  // dx = g - sum(g, -1, keep_dims) * exp(y)
  Output y = Out(s, op, 0);
  Output sum = ops::Sum(s, g[0], {-1}, true);
  *out = {ops::Sub(s, g[0], ops::Mul(s, sum, ops::Exp(s, y)))};
  return Done(s);
}

// SoftmaxCrossEntropyWithLogits and the sparse variant: outputs (loss,
// backprop); d loss / d logits = backprop * g[:, None]. Dense labels get
// -log_softmax(logits) * g[:, None] (TF1's _v2; tf.nn's v1 stops it with
// StopGradient), sparse ones none. A gradient arriving at the backprop
// output itself is not propagated.
GRAD_FN(CrossEntropyGrad) {
  if (!g[0].ok()) {
    *out = {Output(), Output()};
    return Done(s);
  }
  Output expanded = ops::Reshape(s, g[0], {-1, 1});
  Output labels_grad;
  if (op.node()->op() == "SoftmaxCrossEntropyWithLogits") {
    Output log_softmax = Out(s, ops::Raw(s, "LogSoftmax", {Input(s, op, 0)}));
    labels_grad = ops::Neg(s, ops::Mul(s, expanded, log_softmax));
  }
  *out = {ops::Mul(s, expanded, Out(s, op, 1)), labels_grad};
  return Done(s);
}

GRAD_FN(L2LossGrad) {
  *out = {ops::Mul(s, Input(s, op, 0), g[0])};
  return Done(s);
}

// Dropout: outputs (y, mask), y = x * mask; dx = g * mask.
GRAD_FN(DropoutGrad) {
  if (!g[0].ok()) {
    out->clear();
    PadNone(op, out);
    return Done(s);
  }
  *out = {ops::Mul(s, g[0], Out(s, op, 1))};
  PadNone(op, out);
  return Done(s);
}

// TopKV2: g of each chosen value goes back to its index (one-hot rows of
// the indices, weighted by g, summed over the k choices).
GRAD_FN(TopKGrad) {
  Output x = Input(s, op, 0);
  if (!g[0].ok()) {
    *out = {ops::ZerosLike(s, x), Output()};
    return Done(s);
  }
  Output depth = Out(
      s, ops::Raw(s, "StridedSlice", {ops::Shape(s, x), ops::Const(s, {-1}), ops::Const(s, {0}), ops::Const(s, {1})},
                  [](proto::NodeDef* n) { SetAttrInt(n, "shrink_axis_mask", 1); }));
  Output dt1 = grad::ScalarConst(s, 1, x.dtype()), dt0 = grad::ScalarConst(s, 0, x.dtype());
  Output hot = Out(s, ops::Raw(s, "OneHot", {Out(s, op, 1), depth, dt1, dt0}));
  Output weighted = ops::Mul(s, hot, Out(s, ops::Raw(s, "ExpandDims", {g[0], ops::Const(s, -1)})));
  *out = {ops::Sum(s, weighted, {-2}), Output()};
  return Done(s);
}

GRAD_FN(LrnGrad) {
  *out = {BuildLike(s, "LRNGrad", {g[0], Input(s, op, 0), Out(s, op, 0)}, op.node())};
  return Done(s);
}

#undef GRAD_FN

}  // namespace

void RegisterNnGradients(GradientRegistry* r) {
  r->Register("Relu", FeaturesGrad("ReluGrad"));
  r->Register("Relu6", FeaturesGrad("Relu6Grad"));
  r->Register("Softplus", FeaturesGrad("SoftplusGrad"));
  r->Register("LeakyRelu", FeaturesGrad("LeakyReluGrad"));
  r->Register("Elu", EluGrad);
  r->Register("Sigmoid", SigmoidGrad);
  r->Register("Tanh", TanhGrad);
  r->Register("BiasAdd", BiasAddGrad);
  r->Register("Conv2D", Conv2DGrad);
  r->Register("Conv2DBackpropInput", Conv2DBackpropInputGrad);
  r->Register("MaxPool", MaxPoolGrad);
  r->Register("AvgPool", AvgPoolGrad);
  r->Register("Softmax", SoftmaxGrad);
  r->Register("LogSoftmax", LogSoftmaxGrad);
  r->Register("SoftmaxCrossEntropyWithLogits", CrossEntropyGrad);
  r->Register("SparseSoftmaxCrossEntropyWithLogits", CrossEntropyGrad);
  r->Register("L2Loss", L2LossGrad);
  r->Register("Dropout", DropoutGrad);
  r->Register("DropoutMasked", DropoutGrad);
  r->Register("TopKV2", TopKGrad);
  r->Register("LRN", LrnGrad);
  r->RegisterNoGradient("InTopK");
  r->RegisterNoGradient("InTopKV2");
}

}  // namespace distflow
