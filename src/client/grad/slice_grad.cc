// Gradients of the slicing and dimension ops (TensorFlow's array_grad.py):
// StridedSlice (StridedSliceGrad scatters g back), Split and SplitV (the
// parts' gradients concatenated, zeros for parts without one), Pad (the
// unpadded window of g), ExpandDims and Squeeze (g reshaped back).
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

using grad::BuildLike;
using grad::Input;
using grad::Out;

using Grads = std::vector<Output>;

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

// Shape(x) with out_type `dt` (int32 or int64).
Output ShapeOf(const Scope& s, const Output& x, DataType dt) {
  return Out(s, ops::Raw(s, "Shape", {x}, [&](proto::NodeDef* n) { SetAttrType(n, "out_type", dt); }));
}

GRAD_FN(StridedSliceGrad) {
  Output x = Input(s, op, 0), begin = Input(s, op, 1);
  *out = {BuildLike(s, "StridedSliceGrad",
                    {ShapeOf(s, x, begin.dtype()), begin, Input(s, op, 2), Input(s, op, 3), g[0]}, op.node()),
          Output(), Output(), Output()};
  return s.status();
}

// The parts' gradients (zeros where a part has none) concatenated on `axis`.
Output ConcatParts(const Scope& s, const Operation& op, const Grads& g, const Output& axis) {
  std::vector<Output> parts;
  for (int i = 0; i < op.node()->num_outputs(); ++i) {
    const Output& gi = g[static_cast<size_t>(i)];
    parts.push_back(gi.ok() ? gi : ops::ZerosLike(s, Out(s, op, i)));
  }
  if (parts.size() == 1) return parts[0];
  std::vector<Output> in = parts;
  in.push_back(axis);
  return Out(s, ops::Raw(s, "Concat", in));
}

GRAD_FN(SplitGrad) {
  *out = {Output(), ConcatParts(s, op, g, Input(s, op, 0))};
  return s.status();
}

GRAD_FN(SplitVGrad) {
  *out = {ConcatParts(s, op, g, Input(s, op, 2)), Output(), Output()};
  return s.status();
}

GRAD_FN(PadGrad) {
  // g[paddings[:, 0] : paddings[:, 0] + shape(x)]
  Output x = Input(s, op, 0);
  Output p = ops::Cast(s, Input(s, op, 1), DT_INT32);
  Output lo = ops::Reshape(s, Out(s, ops::Raw(s, "Slice", {p, ops::Const(s, {0, 0}), ops::Const(s, {-1, 1})})), {-1});
  *out = {Out(s, ops::Raw(s, "Slice", {g[0], lo, ops::Shape(s, x)})), Output()};
  if (op.node()->num_inputs() == 3) out->push_back(Output());
  return s.status();
}

GRAD_FN(ReshapeBackGrad) {
  *out = {ops::Reshape(s, g[0], ops::Shape(s, Input(s, op, 0)))};
  for (int i = 1; i < op.node()->num_inputs(); ++i) out->push_back(Output());
  return s.status();
}

#undef GRAD_FN

}  // namespace

void RegisterSliceGradients(GradientRegistry* r) {
  r->Register("StridedSlice", StridedSliceGrad);
  r->Register("Split", SplitGrad);
  r->Register("SplitV", SplitVGrad);
  r->Register("Pad", PadGrad);
  r->Register("PadV2", PadGrad);
  r->Register("ExpandDims", ReshapeBackGrad);
  r->Register("Squeeze", ReshapeBackGrad);
  r->RegisterNoGradient("Where");
}

}  // namespace distflow
