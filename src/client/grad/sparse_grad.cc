// Gradients of the sparse ops (TF's array_grad.py / math_grad.py / data_flow_grad.py):
// Gather, GatherV2 along axis 0 and SparseSegmentSum give IndexedSlices
// gradients (only the looked-up rows, see distflow/gradients.h); GatherV2
// along another axis, UnsortedSegmentSum, DynamicPartition, DynamicStitch and
// SparseSegmentMean give dense ones, as do GatherNd (a ScatterNd) and
// ScatterNd (a GatherNd). Unique and the Scatter* updates have
// none.
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using Grads = std::vector<Output>;

#define GRAD_FN(NAME) absl::Status NAME(const Scope& s, const Operation& op, const Grads& g, Grads* out)

Output Int64Shape(const Scope& s, const Output& x) {
  return Out(s, ops::Raw(s, "Shape", {x}, [](proto::NodeDef* n) { SetAttrType(n, "out_type", DT_INT64); }));
}

// params.shape[0] (an int64 scalar) and params.shape[1:] (an int64 vector),
// constants when the shape is known.
std::pair<Output, Output> RowsAndRowShape(const Scope& s, const Output& params) {
  const PartialShape ps = params.shape();
  if (ps.IsFullyDefined() && ps.rank() >= 1) {
    std::vector<int64_t> row(ps.dims().begin() + 1, ps.dims().end());
    return {ops::Const(s, static_cast<int64_t>(ps.dim(0))), ops::Const(s, Tensor::FromVector<int64_t>(row))};
  }
  Output sh = Int64Shape(s, params);
  return {ops::Reshape(s, ops::Slice(s, sh, {0}, {1}), std::vector<int64_t>{}), ops::Slice(s, sh, {1}, {-1})};
}

// The IndexedSlices gradient of rows `indices` of `params` given the
// gradient `g` of shape indices.shape + params.shape[1:].
Output RowsGradient(const Scope& s, const Output& params, const Output& indices, const Output& g) {
  auto [rows, row_shape] = RowsAndRowShape(s, params);
  Output values = ops::Reshape(s, g, ops::Concat(s, {ops::Const(s, Tensor::FromVector<int64_t>({-1})), row_shape}, 0));
  // Vector indices are used as they are: a reshape would run on the
  // gradient's device, and ids computed where the table lives (a sharded
  // lookup) would cross to it and back.
  Output flat = indices.shape().rank() == 1 ? indices : ops::Reshape(s, indices, std::vector<int64_t>{-1});
  return IndexedSlicesGradient(s, {values, flat, rows});
}

GRAD_FN(GatherGrad) {
  *out = {RowsGradient(s, Input(s, op, 0), Input(s, op, 1), g[0]), Output()};
  return s.status();
}

// Along axis a: view params as [outer, n, inner] and g as [outer, m, inner];
// rows of n are summed from g transposed to [m, outer, inner].
GRAD_FN(GatherV2Grad) {
  const Output params = Input(s, op, 0), indices = Input(s, op, 1), axis_in = Input(s, op, 2);
  Tensor axis_t;
  if (axis_in.node()->op() != "Const") {
    return absl::InvalidArgumentError("the gradient of GatherV2 needs a constant axis");
  }
  ASSIGN_OR_RETURN(Tensor axis_value, GetAttrTensor(axis_in.node()->def(), "value"));
  int64_t axis = axis_value.dtype() == DT_INT64 ? axis_value.flat<int64_t>()[0] : axis_value.flat<int32_t>()[0];
  const int rank = params.shape().rank();
  if (axis < 0) {
    if (rank < 0) return absl::InvalidArgumentError("the gradient of GatherV2 with a negative axis needs params' rank");
    axis += rank;
  }
  if (axis == 0) {
    *out = {RowsGradient(s, params, indices, g[0]), Output(), Output()};
    return s.status();
  }
  Output sh = Int64Shape(s, params);
  Output outer = ops::Prod(s, ops::Slice(s, sh, {0}, {axis}), {0});
  Output n = ops::Reshape(s, ops::Slice(s, sh, {axis}, {1}), std::vector<int64_t>{});
  Output inner = ops::Prod(s, ops::Slice(s, sh, {axis + 1}, {-1}), {0});
  Output minus_one = ops::Const(s, int64_t{-1});
  Output g3 = ops::Reshape(s, g[0], ops::Pack(s, {outer, minus_one, inner}));
  Output summed = ops::UnsortedSegmentSum(s, ops::Transpose(s, g3, {1, 0, 2}),
                                          ops::Reshape(s, indices, std::vector<int64_t>{-1}), n);
  *out = {ops::Reshape(s, ops::Transpose(s, summed, {1, 0, 2}), sh), Output(), Output()};
  return s.status();
}

// d data[i] = g[segment_ids[i]], zero where the id is negative (dropped).
GRAD_FN(UnsortedSegmentSumGrad) {
  const Output data = Input(s, op, 0), ids = Input(s, op, 1);
  const int data_rank = data.shape().rank(), ids_rank = ids.shape().rank();
  if (data_rank < 0 || ids_rank < 0) {
    return absl::InvalidArgumentError("the gradient of UnsortedSegmentSum needs the ranks of data and segment_ids");
  }
  Output zero = ids.dtype() == DT_INT64 ? ops::Const(s, int64_t{0}) : ops::Const(s, 0);
  Output gathered = ops::Gather(s, g[0], ops::Maximum(s, ids, zero));
  Output keep = ops::Cast(s, ops::LogicalNot(s, ops::Less(s, ids, zero)), g[0].dtype());
  std::vector<int32_t> ones(static_cast<size_t>(data_rank - ids_rank), 1);
  Output mask_shape = ops::Concat(s, {ops::Shape(s, ids), ops::Const(s, Tensor::FromVector<int32_t>(ones))}, 0);
  *out = {gathered * ops::Reshape(s, keep, mask_shape), Output(), Output()};
  return s.status();
}

// Each output row came from one row of data: stitch the gradients back.
GRAD_FN(DynamicPartitionGrad) {
  const Output data = Input(s, op, 0), parts = Input(s, op, 1);
  const int num = op.node()->num_outputs();
  Output positions =
      ops::Reshape(s, ops::Range(s, ops::Const(s, 0), ops::Size(s, parts), ops::Const(s, 1)), ops::Shape(s, parts));
  std::vector<Output> where = ops::DynamicPartition(s, positions, parts, num);
  std::vector<Output> grads;
  for (int i = 0; i < num; ++i) {
    grads.push_back(g[static_cast<size_t>(i)].ok() ? g[static_cast<size_t>(i)] : ops::ZerosLike(s, Out(s, op, i)));
  }
  if (static_cast<int>(where.size()) != num) return s.status();
  *out = {ops::Reshape(s, ops::DynamicStitch(s, where, grads), ops::Shape(s, data)), Output()};
  return s.status();
}

// Whether a DynamicStitch's indices are known to be distinct: each is a
// different output of one DynamicPartition of a Range (embedding_lookup's
// positions), so no value is overwritten.
bool DistinctStitchIndices(const Node* stitch, int n) {
  const Node* part = nullptr;
  std::vector<bool> used;
  for (int i = 0; i < n; ++i) {
    const NodeOut& in = stitch->input(i);
    if (in.node->op() != "DynamicPartition" || (part != nullptr && in.node != part)) return false;
    part = in.node;
    used.resize(static_cast<size_t>(part->num_outputs()), false);
    if (in.index < 0 || in.index >= part->num_outputs() || used[static_cast<size_t>(in.index)]) return false;
    used[static_cast<size_t>(in.index)] = true;
  }
  if (part == nullptr) return false;
  const Node* data = part->input(0).node;
  while (data->op() == "Reshape" || data->op() == "Identity") data = data->input(0).node;
  return data->op() == "Range";  // Range's delta is never 0 (its kernel refuses it)
}

// Each value's rows of the output's gradient. Where indices repeat, the
// output holds the value written last (the kernel writes in order), so the
// values it overwrote get a zero gradient: a stitch of every value's
// position says which one is in the output at each index.
GRAD_FN(DynamicStitchGrad) {
  const int n = op.node()->num_inputs() / 2;
  out->assign(static_cast<size_t>(n), Output());
  std::vector<Output> grads;
  for (int i = 0; i < n; ++i) grads.push_back(ops::Gather(s, g[0], Input(s, op, i)));
  if (!DistinctStitchIndices(op.node(), n)) {
    std::vector<Output> indices, positions;
    Output offset = ops::Const(s, 0), one = ops::Const(s, 1);
    for (int i = 0; i < n; ++i) {
      const Output idx = Input(s, op, i);
      Output end = ops::Add(s, offset, ops::Size(s, idx));
      indices.push_back(idx);
      positions.push_back(ops::Reshape(s, ops::Range(s, offset, end, one), ops::Shape(s, idx)));
      offset = end;
    }
    Output written = ops::DynamicStitch(s, indices, positions);  // the position of the value each row holds
    for (int i = 0; i < n; ++i) {
      const Output value = Input(s, op, n + i);
      Output kept = ops::Cast(
          s, ops::Equal(s, ops::Gather(s, written, indices[static_cast<size_t>(i)]), positions[static_cast<size_t>(i)]),
          value.dtype());
      // [indices shape] + ones for the value's row dimensions, to broadcast.
      Output row_rank = ops::Reshape(s, ops::Sub(s, ops::Rank(s, value), ops::Rank(s, indices[static_cast<size_t>(i)])),
                                     std::vector<int64_t>{1});
      Output ones = Out(s, ops::Raw(s, "Fill", {row_rank, one}));
      Output shape = ops::Concat(s, {ops::Shape(s, indices[static_cast<size_t>(i)]), ones}, 0);
      grads[static_cast<size_t>(i)] = ops::Mul(s, grads[static_cast<size_t>(i)], ops::Reshape(s, kept, shape));
    }
  }
  out->insert(out->end(), grads.begin(), grads.end());
  return s.status();
}

GRAD_FN(SparseSegmentSumGrad) {
  const Output data = Input(s, op, 0), indices = Input(s, op, 1), seg = Input(s, op, 2);
  *out = {RowsGradient(s, data, indices, ops::Gather(s, g[0], seg)), Output(), Output()};
  return s.status();
}

GRAD_FN(SparseSegmentMeanGrad) {
  const Output data = Input(s, op, 0), indices = Input(s, op, 1), seg = Input(s, op, 2);
  Output dim0 = ops::Cast(s, RowsAndRowShape(s, data).first, DT_INT32);
  *out = {Out(s, ops::Raw(s, "SparseSegmentMeanGrad", {g[0], indices, seg, dim0})), Output(), Output()};
  return s.status();
}

// The gradient of GatherNd is dense: ScatterNd of g at the index tuples
// (duplicates add up), as TF's.
GRAD_FN(GatherNdGrad) {
  const Output params = Input(s, op, 0), indices = Input(s, op, 1);
  Output shape = Out(s, ops::Raw(s, "Shape", {params},
                                 [&indices](proto::NodeDef* n) { SetAttrType(n, "out_type", indices.dtype()); }));
  *out = {Out(s, ops::Raw(s, "ScatterNd", {indices, g[0], shape})), Output()};
  return s.status();
}

GRAD_FN(ScatterNdGrad) {
  *out = {Output(), Out(s, ops::Raw(s, "GatherNd", {g[0], Input(s, op, 0)})), Output()};
  return s.status();
}

// TF's gradient, except for duplicate tuples: the tensor's gradient is g
// with the written slices zeroed; an update's is g at its tuple, but only
// for the update written last at that tuple (the one the output holds;
// the kernel writes in order), zero for those it overwrote.
GRAD_FN(TensorScatterUpdateGrad) {
  const Output indices = Input(s, op, 1), updates = Input(s, op, 2);
  Output tensor_grad = Out(s, ops::Raw(s, "TensorScatterUpdate", {g[0], indices, ops::ZerosLike(s, updates)}));
  // Which update each tuple's slice holds: a scatter of the updates' positions.
  Output one = ops::Const(s, 1), zero = ops::Const(s, 0);
  Output index_shape = ops::Shape(s, indices);
  Output tuples_shape =
      Out(s, ops::Raw(s, "Slice",
                      {index_shape, ops::Const(s, Tensor::FromVector<int32_t>({0})),
                       ops::Reshape(s, ops::Sub(s, ops::Rank(s, indices), one), std::vector<int64_t>{1})}));
  Output positions = ops::Reshape(s, ops::Range(s, zero, ops::Prod(s, tuples_shape, {0}), one), tuples_shape);
  Output k =
      ops::Reshape(s, ops::Gather(s, index_shape, ops::Sub(s, ops::Rank(s, indices), one)), std::vector<int64_t>{1});
  Output addressed = Out(
      s, ops::Raw(s, "Slice", {ops::Shape(s, Input(s, op, 0)), ops::Const(s, Tensor::FromVector<int32_t>({0})), k}));
  Output none = Out(s, ops::Raw(s, "Fill", {addressed, ops::Const(s, -1)}));
  Output written = Out(s, ops::Raw(s, "TensorScatterUpdate", {none, indices, positions}));
  Output kept = ops::Cast(s, ops::Equal(s, ops::GatherNd(s, written, indices), positions), updates.dtype());
  // [tuples shape] + ones for the slice's dimensions, to broadcast.
  Output slice_rank =
      ops::Reshape(s, ops::Sub(s, ops::Rank(s, updates), ops::Size(s, tuples_shape)), std::vector<int64_t>{1});
  Output mask_shape = ops::Concat(s, {tuples_shape, Out(s, ops::Raw(s, "Fill", {slice_rank, one}))}, 0);
  Output updates_grad = ops::Mul(s, ops::GatherNd(s, g[0], indices), ops::Reshape(s, kept, mask_shape));
  *out = {tensor_grad, Output(), updates_grad};
  return s.status();
}

#undef GRAD_FN

}  // namespace

void RegisterSparseGradients(GradientRegistry* r) {
  r->Register("Gather", GatherGrad);
  r->Register("GatherV2", GatherV2Grad);
  r->Register("UnsortedSegmentSum", UnsortedSegmentSumGrad);
  r->Register("DynamicPartition", DynamicPartitionGrad);
  r->Register("DynamicStitch", DynamicStitchGrad);
  r->Register("SparseSegmentSum", SparseSegmentSumGrad);
  r->Register("SparseSegmentMean", SparseSegmentMeanGrad);
  r->Register("GatherNd", GatherNdGrad);
  r->Register("ScatterNd", ScatterNdGrad);
  r->Register("TensorScatterUpdate", TensorScatterUpdateGrad);
  for (const char* op : {"Unique", "ScatterAdd", "ScatterSub", "ScatterUpdate", "ScatterNdUpdate", "ScatterNdAdd",
                         "SparseSegmentMeanGrad"}) {
    r->RegisterNoGradient(op);
  }
}

}  // namespace distflow
