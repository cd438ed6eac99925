// The ops of sparse models (TensorFlow 1.x names and semantics): Gather and
// GatherV2 (rows of a table by id), ScatterAdd/ScatterSub/ScatterUpdate (rows
// of a variable updated in place), Unique, UnsortedSegmentSum,
// DynamicPartition/DynamicStitch (ids routed to table shards and the rows
// put back in order), SparseSegmentSum/SparseSegmentMean (bags of embedding
// rows) and SparseSegmentMeanGrad. Ids are int32 or int64 everywhere.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

std::vector<int64_t> DimsOf(const PartialShape& s) { return std::vector<int64_t>(s.dims().begin(), s.dims().end()); }

// indices.shape + params.shape[axis+1:], after params.shape[:axis].
absl::Status GatherShapeAt(InferenceContext* c, int64_t axis) {
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  if (params.unknown_rank() || indices.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t rank = params.rank();
  if (rank < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gather: params must be at least a vector, got shape ", params.DebugString()));
  }
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("GatherV2: axis ", axis, " is out of range [", -rank, ", ", rank,
                                                   ") for params of shape ", params.DebugString()));
  }
  if (axis < 0) axis += rank;
  const std::vector<int64_t> p = DimsOf(params), i = DimsOf(indices);
  std::vector<int64_t> out(p.begin(), p.begin() + axis);
  out.insert(out.end(), i.begin(), i.end());
  out.insert(out.end(), p.begin() + axis + 1, p.end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status GatherV2Shape(InferenceContext* c) {
  std::vector<int64_t> axis;
  if (!c->ConstantInputAsInts(2, &axis) || axis.size() != 1) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  return GatherShapeAt(c, axis[0]);
}

// The variable's shape; updates must be indices.shape + var.shape[1:].
absl::Status ScatterShape(InferenceContext* c) {
  const PartialShape& var = c->input(0);
  const PartialShape& indices = c->input(1);
  const PartialShape& updates = c->input(2);
  if (!var.unknown_rank() && !indices.unknown_rank() && !updates.unknown_rank() && var.rank() >= 1) {
    std::vector<int64_t> want = DimsOf(indices);
    const std::vector<int64_t> v = DimsOf(var);
    want.insert(want.end(), v.begin() + 1, v.end());
    if (!updates.IsCompatibleWith(PartialShape(absl::MakeConstSpan(want)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          c->node().op(), ": updates of shape ", updates.DebugString(),
          " do not match indices.shape + var.shape[1:] = ", PartialShape(absl::MakeConstSpan(want)).DebugString(),
          " (var ", var.DebugString(), ", indices ", indices.DebugString(), ")"));
    }
  }
  c->set_output(0, var);
  return absl::OkStatus();
}

absl::Status UniqueShape(InferenceContext* c) {
  const PartialShape& x = c->input(0);
  if (!x.unknown_rank() && x.rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("Unique: x must be a vector, got shape ", x.DebugString()));
  }
  c->set_output(0, PartialShape({kUnknown}));
  c->set_output(1, x.unknown_rank() ? PartialShape({kUnknown}) : x);
  return absl::OkStatus();
}

// [num_segments] + data.shape[rank(segment_ids):]
absl::Status UnsortedSegmentShape(InferenceContext* c) {
  const PartialShape& data = c->input(0);
  const PartialShape& ids = c->input(1);
  std::vector<int64_t> n;
  const int64_t num = c->ConstantInputAsInts(2, &n) && n.size() == 1 ? n[0] : kUnknown;
  if (data.unknown_rank() || ids.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (ids.rank() > data.rank() ||
      !PartialShape(absl::MakeConstSpan(DimsOf(data).data(), static_cast<size_t>(ids.rank()))).IsCompatibleWith(ids)) {
    return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum: segment_ids of shape ", ids.DebugString(),
                                                   " must be a prefix of data's shape ", data.DebugString()));
  }
  std::vector<int64_t> out = {num};
  const std::vector<int64_t> d = DimsOf(data);
  out.insert(out.end(), d.begin() + ids.rank(), d.end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// Output i: [?] + data.shape[rank(partitions):]
absl::Status DynamicPartitionShape(InferenceContext* c) {
  const PartialShape& data = c->input(0);
  const PartialShape& parts = c->input(1);
  PartialShape out = PartialShape::Unknown();
  if (!data.unknown_rank() && !parts.unknown_rank()) {
    if (parts.rank() > data.rank()) {
      return absl::InvalidArgumentError(absl::StrCat("DynamicPartition: partitions of shape ", parts.DebugString(),
                                                     " must be a prefix of data's shape ", data.DebugString()));
    }
    std::vector<int64_t> o = {kUnknown};
    const std::vector<int64_t> d = DimsOf(data);
    o.insert(o.end(), d.begin() + parts.rank(), d.end());
    out = PartialShape(absl::MakeConstSpan(o));
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, out);
  return absl::OkStatus();
}

// [max index + 1] + data[0].shape[rank(indices[0]):]
absl::Status DynamicStitchShape(InferenceContext* c) {
  const int n = c->num_inputs() / 2;
  const PartialShape& idx0 = c->input(0);
  const PartialShape& data0 = c->input(n);
  if (idx0.unknown_rank() || data0.unknown_rank() || idx0.rank() > data0.rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int64_t first = kUnknown;
  bool all_known = true;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> v;
    if (!c->ConstantInputAsInts(i, &v)) {
      all_known = false;
      break;
    }
    for (int64_t x : v) first = std::max(first, x + 1);
  }
  std::vector<int64_t> out = {all_known ? std::max<int64_t>(first, 0) : kUnknown};
  const std::vector<int64_t> d = DimsOf(data0);
  out.insert(out.end(), d.begin() + idx0.rank(), d.end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// [?] + data.shape[1:]; indices and segment_ids are vectors.
absl::Status SparseSegmentShape(InferenceContext* c) {
  const PartialShape& data = c->input(0);
  for (int i : {1, 2}) {
    if (!c->input(i).unknown_rank() && c->input(i).rank() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(c->node().op(), ": ", i == 1 ? "indices" : "segment_ids",
                                                     " must be a vector, got shape ", c->input(i).DebugString()));
    }
  }
  if (data.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (data.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->node().op(), ": data must be at least a vector, got shape ", data.DebugString()));
  }
  std::vector<int64_t> out = DimsOf(data);
  out[0] = kUnknown;
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// SparseSegmentMeanGrad(grad, indices, segment_ids, output_dim0):
// [output_dim0] + grad.shape[1:]
absl::Status SparseSegmentGradShape(InferenceContext* c) {
  const PartialShape& g = c->input(0);
  std::vector<int64_t> n;
  const int64_t dim0 = c->ConstantInputAsInts(3, &n) && n.size() == 1 ? n[0] : kUnknown;
  if (g.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> out = DimsOf(g);
  if (out.empty()) return absl::InvalidArgumentError("SparseSegmentMeanGrad: grad must be at least a vector");
  out[0] = dim0;
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

}  // namespace

void RegisterSparseOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("Gather")
                      .Input("params: Tparams")
                      .Input("indices: Tindices")
                      .Output("output: Tparams")
                      .Attr("validate_indices: bool = true")
                      .Attr("Tparams: type")
                      .Attr("Tindices: {int32, int64}")
                      .SetShapeFn([](InferenceContext* c) { return GatherShapeAt(c, 0); }));
  r->MustRegister(OpDefBuilder("GatherV2")
                      .Input("params: Tparams")
                      .Input("indices: Tindices")
                      .Input("axis: Taxis")
                      .Output("output: Tparams")
                      .Attr("batch_dims: int = 0")
                      .Attr("Tparams: type")
                      .Attr("Tindices: {int32, int64}")
                      .Attr("Taxis: {int32, int64}")
                      .SetShapeFn(GatherV2Shape));
  for (const char* op : {"ScatterAdd", "ScatterSub", "ScatterUpdate"}) {
    r->MustRegister(
        OpDefBuilder(op)
            .Input("ref: Ref(T)")
            .Input("indices: Tindices")
            .Input("updates: T")
            .Output("output_ref: Ref(T)")
            .Attr(std::string(op) == "ScatterUpdate" ? "T: type" : "T: {float, double, int32, int64}")
            .Attr("Tindices: {int32, int64}")
            .Attr(std::string(op) == "ScatterUpdate" ? "use_locking: bool = true" : "use_locking: bool = false")
            .SetShapeFn(ScatterShape));
  }
  r->MustRegister(OpDefBuilder("Unique")
                      .Input("x: T")
                      .Output("y: T")
                      .Output("idx: out_idx")
                      .Attr("T: type")
                      .Attr("out_idx: {int32, int64} = int32")
                      .SetShapeFn(UniqueShape));
  r->MustRegister(OpDefBuilder("UnsortedSegmentSum")
                      .Input("data: T")
                      .Input("segment_ids: Tindices")
                      .Input("num_segments: Tnumsegments")
                      .Output("output: T")
                      .Attr("T: {float, double, int32, int64}")
                      .Attr("Tindices: {int32, int64}")
                      .Attr("Tnumsegments: {int32, int64} = int32")
                      .SetShapeFn(UnsortedSegmentShape));
  r->MustRegister(OpDefBuilder("DynamicPartition")
                      .Input("data: T")
                      .Input("partitions: int32")
                      .Output("outputs: num_partitions * T")
                      .Attr("num_partitions: int >= 1")
                      .Attr("T: type")
                      .SetShapeFn(DynamicPartitionShape));
  r->MustRegister(OpDefBuilder("DynamicStitch")
                      .Input("indices: N * int32")
                      .Input("data: N * T")
                      .Output("merged: T")
                      .Attr("N: int >= 1")
                      .Attr("T: type")
                      .SetShapeFn(DynamicStitchShape));
  for (const char* op : {"SparseSegmentSum", "SparseSegmentMean"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("data: T")
                        .Input("indices: Tidx")
                        .Input("segment_ids: int32")
                        .Output("output: T")
                        .Attr("T: {float, double}")
                        .Attr("Tidx: {int32, int64} = int32")
                        .SetShapeFn(SparseSegmentShape));
  }
  r->MustRegister(OpDefBuilder("SparseSegmentMeanGrad")
                      .Input("grad: T")
                      .Input("indices: Tidx")
                      .Input("segment_ids: int32")
                      .Input("output_dim0: int32")
                      .Output("output: T")
                      .Attr("T: {float, double}")
                      .Attr("Tidx: {int32, int64} = int32")
                      .SetShapeFn(SparseSegmentGradShape));
}

}  // namespace distflow
