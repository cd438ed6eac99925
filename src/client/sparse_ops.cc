// The sparse op wrappers of distflow/ops.h: Gather, Scatter*, Unique,
// UnsortedSegmentSum, DynamicPartition/DynamicStitch, SparseSegment*.
#include "distflow/ops.h"

#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace {

Output Build(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
             const std::function<void(proto::NodeDef*)>& attrs = nullptr) {
  return Output(Raw(s, op, inputs, attrs), 0, s.WithOpName(""));
}

std::vector<Output> Outputs(const Scope& s, const Operation& op, int n) {
  std::vector<Output> out;
  if (!op.ok()) return out;
  for (int i = 0; i < n; ++i) out.emplace_back(op, i, s.WithOpName(""));
  return out;
}

}  // namespace

Output Gather(const Scope& s, const Output& params, const Output& indices, int axis) {
  if (axis == 0) return Build(s, "Gather", {params, indices});
  return Build(s, "GatherV2", {params, indices, Const(s.WithOpName(""), axis)});
}
Output ScatterAdd(const Scope& s, const Output& ref, const Output& indices, const Output& updates) {
  return Build(s, "ScatterAdd", {ref, indices, updates});
}
Output ScatterSub(const Scope& s, const Output& ref, const Output& indices, const Output& updates) {
  return Build(s, "ScatterSub", {ref, indices, updates});
}
Output ScatterUpdate(const Scope& s, const Output& ref, const Output& indices, const Output& updates) {
  return Build(s, "ScatterUpdate", {ref, indices, updates});
}
std::vector<Output> Unique(const Scope& s, const Output& x, DataType out_idx) {
  return Outputs(s, Raw(s, "Unique", {x}, [&](proto::NodeDef* n) { SetAttrType(n, "out_idx", out_idx); }), 2);
}
Output UnsortedSegmentSum(const Scope& s, const Output& data, const Output& segment_ids, const Output& num_segments) {
  return Build(s, "UnsortedSegmentSum", {data, segment_ids, num_segments});
}
std::vector<Output> DynamicPartition(const Scope& s, const Output& data, const Output& partitions,
                                     int num_partitions) {
  return Outputs(s, Raw(s, "DynamicPartition", {data, partitions},
                        [&](proto::NodeDef* n) { SetAttrInt(n, "num_partitions", num_partitions); }),
                 num_partitions);
}
Output DynamicStitch(const Scope& s, const std::vector<Output>& indices, const std::vector<Output>& data) {
  std::vector<Output> in = indices;
  in.insert(in.end(), data.begin(), data.end());
  // Two lists share N, which the generic inference does not split: set it.
  const int n = static_cast<int>(indices.size());
  return Build(s, "DynamicStitch", in, [n](proto::NodeDef* d) { SetAttrInt(d, "N", n); });
}
Output SparseSegmentSum(const Scope& s, const Output& data, const Output& indices, const Output& segment_ids) {
  return Build(s, "SparseSegmentSum", {data, indices, segment_ids});
}
Output SparseSegmentMean(const Scope& s, const Output& data, const Output& indices, const Output& segment_ids) {
  return Build(s, "SparseSegmentMean", {data, indices, segment_ids});
}

}  // namespace ops
}  // namespace distflow
