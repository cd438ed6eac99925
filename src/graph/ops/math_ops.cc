// Elementwise math ops: arithmetic with numpy broadcasting, comparisons,
// logic, unary functions (Log1p, Expm1, Reciprocal, Floor, ... included), AddN, Cast and Select (TensorFlow semantics).
#include "absl/strings/str_cat.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

// Select(condition, t, e): t and e have one shape; condition is a scalar,
// has that shape, or (TF1) is a vector whose length is t's dimension 0.
absl::Status SelectShape(InferenceContext* c) {
  const PartialShape& cond = c->input(0);
  const PartialShape& t = c->input(1);
  const PartialShape& e = c->input(2);
  absl::StatusOr<PartialShape> out = t.Merge(e);
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'t' and 'e' must have the same shape: ", t.DebugString(), " vs ", e.DebugString()));
  }
  if (cond.unknown_rank() || cond.rank() == 0 || out->unknown_rank()) {
    c->set_output(0, *out);
    return absl::OkStatus();
  }
  if (cond.rank() == 1 && out->rank() > 1) {
    const int64_t a = cond.dim(0), b = out->dim(0);
    if (a >= 0 && b >= 0 && a != b) {
      return absl::InvalidArgumentError(absl::StrCat("condition of shape ", cond.DebugString(),
                                                     " must have as many elements as dimension 0 of 't' ",
                                                     out->DebugString()));
    }
    PartialShape s = *out;
    if (b < 0 && a >= 0) {
      std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
      dims[0] = a;
      s = PartialShape(dims);
    }
    c->set_output(0, s);
    return absl::OkStatus();
  }
  absl::StatusOr<PartialShape> merged = out->Merge(cond);
  if (!merged.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("condition of shape ", cond.DebugString(),
                                                   " must be a scalar, match the shape of 't' ", out->DebugString(),
                                                   ", or be a vector of its dimension 0"));
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

}  // namespace

void RegisterMathOps(OpRegistry* r) {
  // Binary arithmetic, numpy-broadcasting.
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Input("y: T")
                        .Output("z: T")
                        .Attr("T: {float, double, int32, int64, uint8}")
                        .SetShapeFn(BroadcastBinaryShape));
  }
  for (const char* op : {"Div", "Pow"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Input("y: T")
                        .Output("z: T")
                        .Attr("T: {float, double, int32, int64}")
                        .SetShapeFn(BroadcastBinaryShape));
  }

  // Comparisons, numpy-broadcasting, bool result.
  for (const char* op : {"Less", "LessEqual", "Greater", "GreaterEqual"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Input("y: T")
                        .Output("z: bool")
                        .Attr("T: {float, double, int32, int64, uint8}")
                        .SetShapeFn(BroadcastBinaryShape));
  }
  for (const char* op : {"Equal", "NotEqual"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Input("y: T")
                        .Output("z: bool")
                        .Attr("T: {float, double, int32, int64, uint8, bool}")
                        .SetShapeFn(BroadcastBinaryShape));
  }

  // Logic.
  for (const char* op : {"LogicalAnd", "LogicalOr"}) {
    r->MustRegister(
        OpDefBuilder(op).Input("x: bool").Input("y: bool").Output("z: bool").SetShapeFn(BroadcastBinaryShape));
  }
  r->MustRegister(OpDefBuilder("LogicalNot").Input("x: bool").Output("y: bool").SetShapeFn(UnchangedShape));

  // Unary.
  for (const char* op : {"Neg", "Square", "Abs", "Sign"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Output("y: T")
                        .Attr("T: {float, double, int32, int64}")
                        .SetShapeFn(UnchangedShape));
  }
  // Float-only unary functions; Floor, Ceil and Round (half to even) too, as
  // TF1's integer forms are identities nobody calls.
  for (const char* op :
       {"Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Expm1", "Reciprocal", "Sin", "Cos", "Floor", "Ceil", "Round"}) {
    r->MustRegister(
        OpDefBuilder(op).Input("x: T").Output("y: T").Attr("T: {float, double}").SetShapeFn(UnchangedShape));
  }

  for (const char* op : {"IsNan", "IsInf", "IsFinite"}) {
    r->MustRegister(
        OpDefBuilder(op).Input("x: T").Output("y: bool").Attr("T: {float, double}").SetShapeFn(UnchangedShape));
  }

  r->MustRegister(OpDefBuilder("AddN")
                      .Input("inputs: N * T")
                      .Output("sum: T")
                      .Attr("N: int >= 1")
                      .Attr("T: {float, double, int32, int64, uint8}")
                      .SetShapeFn(MergeAllInputsShape));

  r->MustRegister(OpDefBuilder("Cast")
                      .Input("x: SrcT")
                      .Output("y: DstT")
                      .Attr("SrcT: {float, double, int32, int64, uint8, bool}")
                      .Attr("DstT: {float, double, int32, int64, uint8, bool}")
                      .SetShapeFn(UnchangedShape));

  r->MustRegister(OpDefBuilder("Select")
                      .Input("condition: bool")
                      .Input("t: T")
                      .Input("e: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .SetShapeFn(SelectShape));
}

}  // namespace distflow
