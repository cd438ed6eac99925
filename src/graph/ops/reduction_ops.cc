// Reduction ops: Sum, Mean, Max, Min, Prod (reduce over a set of axes, with
// keep_dims) and ArgMax, ArgMin (index of the extreme value along one axis).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/shape_rules.h"

namespace distflow {
namespace {

absl::Status ReductionShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(bool keep, GetAttrBool(c->node(), "keep_dims"));
  if (!c->input(1).unknown_rank() && c->input(1).rank() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduction_indices must be a scalar or vector, got shape ", c->input(1).DebugString()));
  }
  std::vector<int64_t> axes;
  if (!c->ConstantInputAsInts(1, &axes)) {
    if (keep && !in.unknown_rank()) {
      c->set_output(0, PartialShape::UnknownOfRank(in.rank()));
    } else {
      c->set_output(0, PartialShape::Unknown());
    }
    return absl::OkStatus();
  }
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int rank = in.rank();
  ASSIGN_OR_RETURN(std::vector<bool> reduce, ReductionMask(axes, rank));
  std::vector<int64_t> out;
  for (int d = 0; d < rank; ++d) {
    if (!reduce[static_cast<size_t>(d)]) {
      out.push_back(in.dim(d));
    } else if (keep) {
      out.push_back(1);
    }
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status ArgReductionShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, "dimension").status());
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int rank = in.rank();
  if (rank == 0) return absl::InvalidArgumentError("input must have rank at least 1, got a scalar");
  std::vector<int64_t> axis;
  if (!c->ConstantInputAsInts(1, &axis) || axis.size() != 1) {
    c->set_output(0, PartialShape::UnknownOfRank(rank - 1));
    return absl::OkStatus();
  }
  int64_t a = axis[0];
  if (a < -rank || a >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected dimension in the range [", -rank, ", ", rank, "), but got ", a));
  }
  if (a < 0) a += rank;
  if (in.dim(static_cast<int>(a)) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("Reduction axis ", a, " is empty in shape ", in.DebugString()));
  }
  std::vector<int64_t> out;
  for (int i = 0; i < rank; ++i) {
    if (i != a) out.push_back(in.dim(i));
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

}  // namespace

void RegisterReductionOps(OpRegistry* r) {
  for (const char* op : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("input: T")
                        .Input("reduction_indices: Tidx")
                        .Output("output: T")
                        .Attr("keep_dims: bool = false")
                        .Attr("T: {float, double, int32, int64}")
                        .Attr("Tidx: {int32, int64} = int32")
                        .SetShapeFn(ReductionShape));
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("input: T")
                        .Input("dimension: Tidx")
                        .Output("output: output_type")
                        .Attr("T: {float, double, int32, int64}")
                        .Attr("Tidx: {int32, int64} = int32")
                        .Attr("output_type: {int32, int64} = int64")
                        .SetShapeFn(ArgReductionShape));
  }
}

}  // namespace distflow
