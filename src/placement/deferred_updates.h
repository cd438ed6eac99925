// Deferred variable updates (docs/PERFORMANCE.md, "Deferred variable
// updates"): in asynchronous training, a ps task answers a step's RunGraph
// once everything the step's other tasks need from it has been sent and
// every tensor it receives has arrived, and applies the step's updates in
// the background. A step asks for it by running a node with the attribute
// kDeferVariableUpdatesAttr = true (distflow/train/defer_updates.h makes
// one). The master then (1) partitions the step so that no other task waits
// for the updates themselves (DeferredUpdateEdges), and (2) marks each
// partition whose remaining nodes, those that feed nothing outside it, are
// variable updates and plain computations (MarkDeferredUpdates); a step
// whose remaining nodes do anything else (a synchronous replica's
// accumulators and token queue, a checkpoint) is not deferred at all.
//
// Stateless functions and an immutable helper; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "graph/graph.h"
#include "placement/partition.h"

namespace distflow {

inline constexpr char kDeferVariableUpdatesAttr[] = "_defer_variable_updates";

// True if one of the step's nodes asks for deferred updates.
bool StepDefersUpdates(const std::vector<const Node*>& nodes);

// An op that updates the variables it takes by reference (Apply*,
// SparseApply*, FusedApply*, Assign*, Scatter*).
bool IsVariableUpdateOp(const std::string& op);

// The control edges of a deferring step (PartitionGraph's
// PartitionOptions::defer_updates). A node on device D that waits for a
// variable update U on another device waits instead for what U consumes
// from D (a gradient computed there), unless something downstream of the
// node runs on U's device (then it keeps its edge, so that node still sees
// the update). U becomes a target of its own partition.
class DeferredUpdateEdges {
 public:
  DeferredUpdateEdges(const std::vector<const Node*>& nodes, const std::vector<std::string>& placement);

  // True if `source` (a control source of `consumer`, on another device) is
  // an update `consumer` need not wait for; then `stand_ins` gets what
  // `consumer` waits for instead (nodes on the consumer's device).
  bool Defer(const Node* consumer, const Node* source, std::vector<const Node*>* stand_ins) const;

 private:
  const std::string& DeviceOf(const Node* n) const { return placement_[static_cast<size_t>(n->id())]; }
  bool ReachesDevice(const Node* from, const std::string& device) const;

  const std::vector<std::string>& placement_;
  absl::flat_hash_map<const Node*, std::vector<const Node*>> consumers_;  // data and control, within the step
};

// Marks (Partition::defer_updates) each partition of a step partitioned
// with deferred updates whose remaining nodes hold a variable update.
// FailedPrecondition, naming the node and its task, if a partition's
// remaining nodes do something that cannot be deferred (only variable
// updates and stateless computations can), or if no partition has an
// update to defer: the caller then partitions the step without deferral.
absl::Status MarkDeferredUpdates(const Graph& graph, std::map<std::string, Partition>* parts);

}  // namespace distflow
