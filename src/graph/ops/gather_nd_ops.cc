// GatherNd and ScatterNd (TensorFlow 1.x names and semantics): slices of a
// tensor addressed by index tuples, and their inverse. With indices of
// shape [..., k], GatherNd(params, indices) is indices.shape[:-1] +
// params.shape[k:], each index tuple naming one element (k = rank) or one
// slice (k < rank) of params; ScatterNd(indices, updates, shape) makes a
// zero tensor of `shape` and adds each row of updates at its tuple
// (duplicates add up), which is also GatherNd's gradient.
// ScatterNdUpdate and ScatterNdAdd write the slices of updates into a
// variable at their tuples in place (assigned, the last duplicate winning;
// or added); TensorScatterUpdate (tf.tensor_scatter_nd_update) is the
// functional form: a copy of `tensor` with the slices assigned.
#include <string>
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

// ScatterNdUpdate, ScatterNdAdd (on a variable) and TensorScatterUpdate:
// the output has the shape of input 0, and updates must be
// indices.shape[:-1] + input0.shape[k:].
absl::Status ScatterNdIntoShape(InferenceContext* c, const char* op) {
  const PartialShape& base = c->input(0);
  const PartialShape& indices = c->input(1);
  const PartialShape& updates = c->input(2);
  if (!indices.unknown_rank() && indices.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": indices must be at least a vector, got shape ", indices.DebugString()));
  }
  if (!base.unknown_rank() && !indices.unknown_rank() && !updates.unknown_rank() &&
      indices.dim(indices.rank() - 1) != kUnknown) {
    const int64_t k = indices.dim(indices.rank() - 1);
    if (k > base.rank()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": index tuples of length ", k, " (indices of shape ",
                                                     indices.DebugString(), ") address more dimensions than ",
                                                     base.DebugString(), " has"));
    }
    std::vector<int64_t> want = DimsOf(indices);
    want.pop_back();
    const std::vector<int64_t> b = DimsOf(base);
    want.insert(want.end(), b.begin() + k, b.end());
    if (!updates.IsCompatibleWith(PartialShape(absl::MakeConstSpan(want)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": updates of shape ", updates.DebugString(),
          " do not match indices.shape[:-1] + shape[k:] = ", PartialShape(absl::MakeConstSpan(want)).DebugString(),
          " (indices ", indices.DebugString(), ", shape ", base.DebugString(), ")"));
    }
  }
  c->set_output(0, base);
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
  for (const char* op : {"ScatterNdUpdate", "ScatterNdAdd"}) {
    const bool update = std::string(op) == "ScatterNdUpdate";
    r->MustRegister(OpDefBuilder(op)
                        .Input("ref: Ref(T)")
                        .Input("indices: Tindices")
                        .Input("updates: T")
                        .Output("output_ref: Ref(T)")
                        .Attr(update ? "T: type" : "T: {float, double, int32, int64}")
                        .Attr("Tindices: {int32, int64}")
                        .Attr(update ? "use_locking: bool = true" : "use_locking: bool = false")
                        .SetShapeFn([op](InferenceContext* c) { return ScatterNdIntoShape(c, op); }));
  }
  r->MustRegister(OpDefBuilder("TensorScatterUpdate")
                      .Input("tensor: T")
                      .Input("indices: Tindices")
                      .Input("updates: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Tindices: {int32, int64}")
                      .SetShapeFn([](InferenceContext* c) { return ScatterNdIntoShape(c, "TensorScatterUpdate"); }));
}

}  // namespace distflow
