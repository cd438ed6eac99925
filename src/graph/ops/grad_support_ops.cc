// Gradient-support ops: small helpers the symbolic gradients (client/grad/)
// build their backward graphs with.
//
//   BroadcastGradientArgs(s0, s1) -> (r0, r1): the axes along which the
//       gradient of a broadcasting binary op must be summed for each input
//       (TensorFlow semantics).
//   ReducedShape(input_shape, axes): input_shape with the reduced axes set to 1.
//   BroadcastTo(input, shape): numpy-broadcasts input to shape.
//   InvertPermutation(x): y[x[i]] = i.
//   ConcatOffset(concat_dim, shape_0..shape_{N-1}): each input's offset in the
//       concatenation (TensorFlow semantics).
//   SliceGrad(input_shape, begin, grad): a zero tensor of input_shape with
//       grad placed at begin (the gradient of Slice).
//   ReduceProdGrad(input, reduction_indices): for every element, the product
//       of the other elements of its reduction group (exact with zeros).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

absl::Status UnknownVector(InferenceContext* c, int i, const char* what) {
  RETURN_IF_ERROR(c->WithRank(c->input(i), 1, what).status());
  return absl::OkStatus();
}

absl::Status BroadcastGradientArgsShape(InferenceContext* c) {
  absl::Status s = UnknownVector(c, 0, "s0");
  if (!s.ok()) return s;
  s = UnknownVector(c, 1, "s1");
  if (!s.ok()) return s;
  c->set_output(0, PartialShape({kUnknown}));
  c->set_output(1, PartialShape({kUnknown}));
  return absl::OkStatus();
}

absl::Status ReducedShapeShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(0), 1, "input_shape"));
  c->set_output(0, s);
  return absl::OkStatus();
}

absl::Status BroadcastToShape(InferenceContext* c) {
  std::vector<int64_t> dims;
  if (c->ConstantInputAsInts(1, &dims)) {
    c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(1), 1, "shape"));
  c->set_output(0, s.dim(0) >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(s.dim(0))) : PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status ConcatOffsetShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(c->input(0), 0, "concat_dim").status());
  for (int i = 1; i < c->num_inputs(); ++i) {
    ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(i), 1, "shape"));
    c->set_output(i - 1, s);
  }
  return absl::OkStatus();
}

absl::Status SliceGradShape(InferenceContext* c) {
  std::vector<int64_t> dims;
  if (c->ConstantInputAsInts(0, &dims)) {
    c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(0), 1, "input_shape"));
  c->set_output(0, s.dim(0) >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(s.dim(0))) : PartialShape::Unknown());
  return absl::OkStatus();
}

}  // namespace

void RegisterGradSupportOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("BroadcastGradientArgs")
                      .Input("s0: T")
                      .Input("s1: T")
                      .Output("r0: T")
                      .Output("r1: T")
                      .Attr("T: {int32, int64} = int32")
                      .SetShapeFn(BroadcastGradientArgsShape));
  r->MustRegister(OpDefBuilder("ReducedShape")
                      .Input("input_shape: T")
                      .Input("axes: Tidx")
                      .Output("output: T")
                      .Attr("T: {int32, int64} = int32")
                      .Attr("Tidx: {int32, int64} = int32")
                      .SetShapeFn(ReducedShapeShape));
  r->MustRegister(OpDefBuilder("BroadcastTo")
                      .Input("input: T")
                      .Input("shape: Tidx")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Tidx: {int32, int64} = int32")
                      .SetShapeFn(BroadcastToShape));
  r->MustRegister(OpDefBuilder("InvertPermutation")
                      .Input("x: T")
                      .Output("y: T")
                      .Attr("T: {int32, int64} = int32")
                      .SetShapeFn(UnchangedShape));
  r->MustRegister(OpDefBuilder("ConcatOffset")
                      .Input("concat_dim: int32")
                      .Input("shape: N * int32")
                      .Output("offset: N * int32")
                      .Attr("N: int >= 2")
                      .SetShapeFn(ConcatOffsetShape));
  r->MustRegister(OpDefBuilder("SliceGrad")
                      .Input("input_shape: Index")
                      .Input("begin: Index")
                      .Input("grad: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Index: {int32, int64} = int32")
                      .SetShapeFn(SliceGradShape));
  r->MustRegister(OpDefBuilder("ReduceProdGrad")
                      .Input("input: T")
                      .Input("reduction_indices: Tidx")
                      .Output("output: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("Tidx: {int32, int64} = int32")
                      .SetShapeFn(UnchangedShape));
}

}  // namespace distflow
