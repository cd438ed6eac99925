// GatherNd and ScatterNd (TensorFlow 1.x names and semantics): slices of a
// tensor addressed by index tuples, and their inverse. With indices of
// shape [..., k], GatherNd(params, indices) is indices.shape[:-1] +
// params.shape[k:], each index tuple naming one element (k = rank) or one
// slice (k < rank) of params; ScatterNd(indices, updates, shape) makes a
// zero tensor of `shape` and adds each row of updates at its tuple
// (duplicates add up), which is also GatherNd's gradient.
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

std::vector<int64_t> DimsOf(const PartialShape& s) { return std::vector<int64_t>(s.dims().begin(), s.dims().end()); }

absl::Status GatherNdShape(InferenceContext* c) {
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  if (!indices.unknown_rank() && indices.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GatherNd: indices must be at least a vector, got shape ", indices.DebugString()));
  }
  if (params.unknown_rank() || indices.unknown_rank() || indices.dim(indices.rank() - 1) == kUnknown) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t k = indices.dim(indices.rank() - 1);
  if (k > params.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("GatherNd: index tuples of length ", k, " (indices of shape ",
                                                   indices.DebugString(), ") address more dimensions than params ",
                                                   "of shape ", params.DebugString(), " has"));
  }
  std::vector<int64_t> out = DimsOf(indices);
  out.pop_back();
  const std::vector<int64_t> p = DimsOf(params);
  out.insert(out.end(), p.begin() + k, p.end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// The constant `shape` input; updates must be indices.shape[:-1] + shape[k:].
absl::Status ScatterNdShape(InferenceContext* c) {
  const PartialShape& indices = c->input(0);
  const PartialShape& updates = c->input(1);
  if (!indices.unknown_rank() && indices.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScatterNd: indices must be at least a vector, got shape ", indices.DebugString()));
  }
  std::vector<int64_t> shape;
  if (!c->ConstantInputAsInts(2, &shape)) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const PartialShape out(absl::MakeConstSpan(shape));
  if (!indices.unknown_rank() && !updates.unknown_rank() && indices.dim(indices.rank() - 1) != kUnknown) {
    const int64_t k = indices.dim(indices.rank() - 1);
    if (k > static_cast<int64_t>(shape.size())) {
      return absl::InvalidArgumentError(absl::StrCat("ScatterNd: index tuples of length ", k,
                                                     " address more dimensions than the output shape ",
                                                     out.DebugString(), " has"));
    }
    std::vector<int64_t> want = DimsOf(indices);
    want.pop_back();
    want.insert(want.end(), shape.begin() + k, shape.end());
    if (!updates.IsCompatibleWith(PartialShape(absl::MakeConstSpan(want)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ScatterNd: updates of shape ", updates.DebugString(),
          " do not match indices.shape[:-1] + shape[k:] = ", PartialShape(absl::MakeConstSpan(want)).DebugString(),
          " (indices ", indices.DebugString(), ", shape ", out.DebugString(), ")"));
    }
  }
  c->set_output(0, out);
  return absl::OkStatus();
}

}  // namespace

void RegisterGatherNdOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("GatherNd")
                      .Input("params: Tparams")
                      .Input("indices: Tindices")
                      .Output("output: Tparams")
                      .Attr("Tparams: type")
                      .Attr("Tindices: {int32, int64}")
                      .SetShapeFn(GatherNdShape));
  r->MustRegister(OpDefBuilder("ScatterNd")
                      .Input("indices: Tindices")
                      .Input("updates: T")
                      .Input("shape: Tindices")
                      .Output("output: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("Tindices: {int32, int64}")
                      .SetShapeFn(ScatterNdShape));
}

}  // namespace distflow
