// IndexedSlices gradients (distflow/gradients.h): the marked
// UnsortedSegmentSum that stands for them in the graph, reading its parts
// back, and the sum of several gradients of one tensor.
#include "absl/strings/str_cat.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

constexpr const char* kMark = "_indexed_slices";

}  // namespace

Output IndexedSlicesGradient(const Scope& scope, const IndexedSlices& slices) {
  Operation op = ops::Raw(scope, "UnsortedSegmentSum", {slices.values, slices.indices, slices.num_rows},
                          [](proto::NodeDef* n) { SetAttrBool(n, kMark, true); });
  return Output(op, 0, scope.WithOpName(""));
}

bool AsIndexedSlices(const Output& grad, IndexedSlices* slices) {
  if (!grad.ok() || grad.node()->op() != "UnsortedSegmentSum" || grad.index() != 0) return false;
  absl::StatusOr<bool> mark = GetAttrBool(grad.node()->def(), kMark);
  if (!mark.ok() || !*mark) return false;
  const Scope& s = grad.scope();
  slices->values = grad::Input(s, grad.op(), 0);
  slices->indices = grad::Input(s, grad.op(), 1);
  slices->num_rows = grad::Input(s, grad.op(), 2);
  return true;
}

namespace grad {

Output AggregateGradients(const Scope& s, const std::vector<Output>& grads) {
  std::vector<IndexedSlices> parts(grads.size());
  bool all_sparse = grads.size() <= static_cast<size_t>(kMaxConcatenatedSlices);
  for (size_t i = 0; i < grads.size() && all_sparse; ++i) all_sparse = AsIndexedSlices(grads[i], &parts[i]);
  if (!all_sparse) return ops::AddN(s, grads);
  std::vector<Output> values, indices;
  bool mixed = false;
  for (const IndexedSlices& p : parts) mixed |= p.indices.dtype() != parts[0].indices.dtype();
  for (const IndexedSlices& p : parts) {
    values.push_back(p.values);
    indices.push_back(mixed && p.indices.dtype() != DT_INT64 ? ops::Cast(s, p.indices, DT_INT64) : p.indices);
  }
  return IndexedSlicesGradient(s, {ops::Concat(s, values, 0), ops::Concat(s, indices, 0), parts[0].num_rows});
}

}  // namespace grad
}  // namespace distflow
