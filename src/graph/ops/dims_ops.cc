// Ops that add, drop or pad dimensions, and Where (TensorFlow 1.x
// semantics): ExpandDims (a size-1 axis at `dim`), Squeeze (drop size-1
// axes, all or the listed ones), Pad / PadV2 (constant padding given as a
// [rank, 2] paddings matrix), and Where (the coordinates of the true, or
// non-zero, elements as an [n, rank] int64 matrix).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

absl::Status ExpandDimsShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> axis;
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t rank = in.rank();
  if (!c->ConstantInputAsInts(1, &axis)) {
    c->set_output(0, PartialShape::UnknownOfRank(static_cast<int>(rank + 1)));
    return absl::OkStatus();
  }
  if (axis.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("ExpandDims: dim must be a scalar, got ", axis.size(), " values"));
  }
  int64_t a = axis[0];
  if (a < -rank - 1 || a > rank) {
    return absl::InvalidArgumentError(absl::StrCat("ExpandDims: dim ", a, " is out of range [", -rank - 1, ", ", rank,
                                                   "] for shape ", in.DebugString()));
  }
  if (a < 0) a += rank + 1;
  std::vector<int64_t> out(in.dims().begin(), in.dims().end());
  out.insert(out.begin() + a, 1);
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status SqueezeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, GetAttrIntList(c->node(), "squeeze_dims"));
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t rank = in.rank();
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Squeeze: axis ", a, " is out of range [", -rank, ", ", rank, ") for shape ", in.DebugString()));
    }
    if (a < 0) a += rank;
    const int64_t d = in.dim(static_cast<int>(a));
    if (d >= 0 && d != 1) {
      return absl::InvalidArgumentError(absl::StrCat("Squeeze: can not squeeze axis ", a, " of shape ",
                                                     in.DebugString(), ": its size is ", d, ", not 1"));
    }
    drop[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = in.dim(static_cast<int>(i));
    if (axes.empty()) {
      if (d < 0) {  // might be 1: the rank is unknown
        c->set_output(0, PartialShape::Unknown());
        return absl::OkStatus();
      }
      if (d == 1) continue;
    } else if (drop[static_cast<size_t>(i)]) {
      continue;
    }
    out.push_back(d);
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status PadShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  const PartialShape& p = c->input(1);
  if (!p.unknown_rank() && (p.rank() != 2 || (p.dim(1) >= 0 && p.dim(1) != 2))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Pad: paddings must be a matrix with 2 columns, got shape ", p.DebugString()));
  }
  if (c->num_inputs() == 3 && !c->input(2).unknown_rank() && c->input(2).rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PadV2: constant_values must be a scalar, got shape ", c->input(2).DebugString()));
  }
  int64_t rank = in.unknown_rank() ? kUnknown : in.rank();
  if (!p.unknown_rank() && p.dim(0) >= 0) {
    if (rank >= 0 && p.dim(0) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("Pad: paddings ", p.DebugString(), " must have one row per ",
                                                     "dimension of the input ", in.DebugString()));
    }
    rank = p.dim(0);
  }
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> pads;
  const bool known = c->ConstantInputAsInts(1, &pads);
  std::vector<int64_t> out(static_cast<size_t>(rank), kUnknown);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = in.unknown_rank() ? kUnknown : in.dim(static_cast<int>(i));
    if (!known) continue;
    const int64_t lo = pads[static_cast<size_t>(2 * i)], hi = pads[static_cast<size_t>(2 * i + 1)];
    if (lo < 0 || hi < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Pad: paddings must be non-negative, got [", lo, ", ", hi, "] for dimension ", i));
    }
    if (d >= 0) out[static_cast<size_t>(i)] = d + lo + hi;
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status WhereShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  c->set_output(0, PartialShape({kUnknown, in.unknown_rank() ? kUnknown : in.rank()}));
  return absl::OkStatus();
}

}  // namespace

void RegisterDimsOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("ExpandDims")
                      .Input("input: T")
                      .Input("dim: Tdim")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Tdim: {int32, int64} = int32")
                      .SetShapeFn(ExpandDimsShape));
  r->MustRegister(OpDefBuilder("Squeeze")
                      .Input("input: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("squeeze_dims: list(int) = []")
                      .SetShapeFn(SqueezeShape));
  r->MustRegister(OpDefBuilder("Pad")
                      .Input("input: T")
                      .Input("paddings: Tpaddings")
                      .Output("output: T")
                      .Attr("T: {float, double, int32, int64, uint8, bool}")
                      .Attr("Tpaddings: {int32, int64} = int32")
                      .SetShapeFn(PadShape));
  r->MustRegister(OpDefBuilder("PadV2")
                      .Input("input: T")
                      .Input("paddings: Tpaddings")
                      .Input("constant_values: T")
                      .Output("output: T")
                      .Attr("T: {float, double, int32, int64, uint8, bool}")
                      .Attr("Tpaddings: {int32, int64} = int32")
                      .SetShapeFn(PadShape));
  r->MustRegister(OpDefBuilder("Where")
                      .Input("input: T")
                      .Output("index: int64")
                      .Attr("T: {bool, float, double, int32, int64, uint8} = bool")
                      .SetShapeFn(WhereShape));
}

}  // namespace distflow
