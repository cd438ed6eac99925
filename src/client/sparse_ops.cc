// The sparse op wrappers of distflow/ops.h: Gather, Scatter*, Unique,
// UnsortedSegmentSum, DynamicPartition/DynamicStitch, SparseSegment*,
// GatherNd/ScatterNd; and those of distflow/scatter_nd.h.
#include <limits>

#include "absl/strings/str_cat.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "distflow/scatter_nd.h"
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
std::vector<Output> DynamicPartition(const Scope& s, const Output& data, const Output& partitions, int num_partitions) {
  return Outputs(s,
                 Raw(s, "DynamicPartition", {data, partitions},
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

Output GatherNd(const Scope& s, const Output& params, const Output& indices) {
  return Build(s, "GatherNd", {params, indices});
}
Output ScatterNd(const Scope& s, const Output& indices, const Output& updates, const Output& shape) {
  return Build(s, "ScatterNd", {indices, updates, shape});
}
Output ScatterNd(const Scope& s, const Output& indices, const Output& updates, const std::vector<int64_t>& shape) {
  // The shape input shares the indices' type (Tindices).
  Tensor dims = Tensor::FromVector<int64_t>(shape);
  if (indices.ok() && indices.dtype() == DT_INT32) {
    for (int64_t d : shape) {
      if (d > std::numeric_limits<int32_t>::max() || d < std::numeric_limits<int32_t>::min()) {
        s.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
            "ScatterNd: shape entry ", d, " does not fit the int32 type of the indices; make them int64")));
        return Output();
      }
    }
    dims = Tensor::FromVector<int32_t>(std::vector<int32_t>(shape.begin(), shape.end()));
  }
  return ScatterNd(s, indices, updates, Const(s.WithOpName(""), dims));
}

Output ScatterNdUpdate(const Scope& s, const Output& ref, const Output& indices, const Output& updates) {
  return Build(s, "ScatterNdUpdate", {ref, indices, updates});
}
Output ScatterNdAdd(const Scope& s, const Output& ref, const Output& indices, const Output& updates) {
  return Build(s, "ScatterNdAdd", {ref, indices, updates});
}
Output TensorScatterUpdate(const Scope& s, const Output& tensor, const Output& indices, const Output& updates) {
  return Build(s, "TensorScatterUpdate", {tensor, indices, updates});
}

Output EmbeddingLookup(const Scope& s, const std::vector<Output>& params, const Output& ids,
                       const std::string& partition_strategy) {
  const Scope aux = s.WithOpName("");
  auto on_device_of = [&](const Output& p) { return aux.WithDevice(p.node()->def().device()); };
  const int n = static_cast<int>(params.size());
  if (n == 0 || !ids.ok() || (partition_strategy != "mod" && partition_strategy != "div")) {
    s.UpdateStatus(absl::InvalidArgumentError(
        n == 0 ? "EmbeddingLookup: params is empty"
               : "EmbeddingLookup: partition_strategy must be 'mod' or 'div', got '" + partition_strategy + "'"));
    return Output();
  }
  if (n == 1) return Gather(on_device_of(params[0]).WithOpName(""), params[0], ids);
  const DataType it = ids.dtype();
  int64_t total = 0;
  if (partition_strategy == "div") {
    for (const Output& p : params) {
      const PartialShape ps = p.shape();
      if (ps.unknown_rank() || ps.rank() < 1 || ps.dim(0) < 0) {
        s.UpdateStatus(absl::InvalidArgumentError("EmbeddingLookup(div) needs every part's number of rows"));
        return Output();
      }
      total += ps.dim(0);
    }
  }
  // (the part of each id, as int32; its row in that part), built in `at`.
  auto assign_and_new_ids = [&](const Scope& at) -> std::pair<Output, Output> {
    auto c = [&](int64_t v) { return it == DT_INT64 ? Const(at, v) : Const(at, static_cast<int>(v)); };
    auto mod = [&](const Output& x, const Output& m) { return Sub(at, x, Mul(at, Div(at, x, m), m)); };
    Output flat = Reshape(at, ids, std::vector<int64_t>{-1});
    Output assign, new_ids;
    if (partition_strategy == "mod") {
      assign = mod(flat, c(n));
      new_ids = Div(at, flat, c(n));
    } else {
      const int64_t per = total / n, extras = total % n;
      Output shifted = Sub(at, flat, c(extras));
      assign = Maximum(at, Div(at, flat, c(per + 1)), Div(at, shifted, c(std::max<int64_t>(per, 1))));
      new_ids =
          Select(at, Less(at, assign, c(extras)), mod(flat, c(per + 1)), mod(shifted, c(std::max<int64_t>(per, 1))));
    }
    if (it != DT_INT32) assign = Cast(at, assign, DT_INT32);
    return {assign, new_ids};
  };
  // Where the rows go back to: computed here. Each part's ids and its
  // Gather: on the part's device, from the ids (which reach it once, with
  // the step when they are fed), so the part's ids never cross the network
  // and the gradient's indices are already where the update runs.
  const Output assign = assign_and_new_ids(aux).first;
  std::vector<Output> positions = DynamicPartition(
      aux, Range(aux, Const(aux, 0), Size(aux, Reshape(aux, ids, std::vector<int64_t>{-1})), Const(aux, 1)), assign, n);
  if (static_cast<int>(positions.size()) != n) return Output();
  std::vector<Output> rows;
  for (int i = 0; i < n; ++i) {
    const Output& p = params[static_cast<size_t>(i)];
    const Scope at = on_device_of(p);
    auto [part_assign, part_ids] = assign_and_new_ids(at);
    std::vector<Output> mine = DynamicPartition(at, part_ids, part_assign, n);
    if (static_cast<int>(mine.size()) != n) return Output();
    rows.push_back(Gather(at, p, mine[static_cast<size_t>(i)]));
  }
  Output stitched = DynamicStitch(aux, positions, rows);
  Output row_shape = Slice(aux, Shape(aux, stitched), {1}, {-1});
  return Reshape(s, stitched, Concat(aux, {Shape(aux, ids), row_shape}, 0));
}

}  // namespace ops
}  // namespace distflow
