// Gradients of the array ops (TensorFlow's array_grad.py) and the no-gradient
// list of sources, shape queries, random and state ops.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using grad::SumAxes;

using Grads = std::vector<Output>;

absl::Status Done(const Scope& s) { return s.status(); }

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

// Shape(x) with out_type `dt` (int32 or int64).
Output ShapeOf(const Scope& s, const Output& x, DataType dt) {
  return Out(s, ops::Raw(s, "Shape", {x}, [&](proto::NodeDef* n) { SetAttrType(n, "out_type", dt); }));
}

GRAD_FN(ReshapeGrad) {
  *out = {ops::Reshape(s, g[0], ops::Shape(s, Input(s, op, 0))), Output()};
  return Done(s);
}

GRAD_FN(TransposeGrad) {
  Output inv = Out(s, ops::Raw(s, "InvertPermutation", {Input(s, op, 1)}));
  *out = {Out(s, ops::Raw(s, "Transpose", {g[0], inv})), Output()};
  return Done(s);
}

GRAD_FN(ConcatGrad) {
  const int n = op.node()->num_inputs() - 1;
  if (n == 1) {
    *out = {g[0], Output()};
    return Done(s);
  }
  Output axis = Input(s, op, n);
  if (axis.dtype() != DT_INT32) axis = ops::Cast(s, axis, DT_INT32);
  std::vector<Output> shapes;
  for (int i = 0; i < n; ++i) shapes.push_back(ops::Shape(s, Input(s, op, i)));
  std::vector<Output> in = {axis};
  in.insert(in.end(), shapes.begin(), shapes.end());
  Operation offsets = ops::Raw(s, "ConcatOffset", in);
  for (int i = 0; i < n; ++i) {
    out->push_back(Out(s, ops::Raw(s, "Slice", {g[0], Out(s, offsets, i), shapes[static_cast<size_t>(i)]})));
  }
  out->push_back(Output());
  return Done(s);
}

GRAD_FN(SliceGrad) {
  Output x = Input(s, op, 0), begin = Input(s, op, 1);
  Output shape = ShapeOf(s, x, begin.dtype());
  *out = {Out(s, ops::Raw(s, "SliceGrad", {shape, begin, g[0]})), Output(), Output()};
  return Done(s);
}

GRAD_FN(PackGrad) {
  const int n = op.node()->num_inputs();
  ASSIGN_OR_RETURN(int64_t axis, GetAttrInt(op.node()->def(), "axis"));
  *out = ops::Unpack(s, g[0], n, static_cast<int>(axis));
  return Done(s);
}

GRAD_FN(UnpackGrad) {
  ASSIGN_OR_RETURN(int64_t axis, GetAttrInt(op.node()->def(), "axis"));
  std::vector<Output> parts;
  for (int i = 0; i < op.node()->num_outputs(); ++i) {
    const Output& gi = g[static_cast<size_t>(i)];
    parts.push_back(gi.ok() ? gi : ops::ZerosLike(s, Out(s, op, i)));
  }
  *out = {ops::Pack(s, parts, static_cast<int>(axis))};
  return Done(s);
}

GRAD_FN(TileGrad) {
  // Reshape g to [m0, d0, m1, d1, ...] and sum over the m axes.
  Output x = Input(s, op, 0), multiples = Input(s, op, 1);
  Output shape = ShapeOf(s, x, multiples.dtype());
  Output packed = ops::Pack(s, {multiples, shape}, 0);
  Output split = ops::Reshape(s, ops::Transpose(s, packed, {1, 0}), {-1});
  Output axes = ops::Range(s, ops::Const(s, 0), ops::Size(s, split), ops::Const(s, 2));
  *out = {SumAxes(s, ops::Reshape(s, g[0], split), axes), Output()};
  return Done(s);
}

GRAD_FN(FillGrad) {
  // dims: none; value: the sum of every element's gradient.
  Output axes = ops::Range(s, ops::Const(s, 0), ops::Rank(s, g[0]), ops::Const(s, 1));
  *out = {Output(), SumAxes(s, g[0], axes)};
  return Done(s);
}

#undef GRAD_FN

}  // namespace

void RegisterArrayGradients(GradientRegistry* r) {
  r->Register("Reshape", ReshapeGrad);
  r->Register("Transpose", TransposeGrad);
  r->Register("Concat", ConcatGrad);
  r->Register("Slice", SliceGrad);
  r->Register("Pack", PackGrad);
  r->Register("Unpack", UnpackGrad);
  r->Register("Tile", TileGrad);
  r->Register("Fill", FillGrad);
  for (const char* op : {"Shape",
                         "Size",
                         "Rank",
                         "Range",
                         "OneHot",
                         "ZerosLike",
                         "OnesLike",
                         "Const",
                         "Placeholder",
                         "Variable",
                         "Assign",
                         "AssignAdd",
                         "AssignSub",
                         "IsVariableInitialized",
                         "RandomUniform",
                         "RandomStandardNormal",
                         "TruncatedNormal",
                         "RandomUniformInt",
                         "Multinomial",
                         "BroadcastGradientArgs",
                         "ReducedShape",
                         "InvertPermutation",
                         "ConcatOffset",
                         "NoOp"}) {
    r->RegisterNoGradient(op);
  }
}

}  // namespace distflow
