// PartitionGraph splits a step's placed nodes (placement.h) per device and
// inserts a _Send/_Recv pair on every edge that crosses devices (control
// edges too, as a tiny tensor sent after the source ran), so that each
// partition is a self-contained GraphDef a worker can run.
//
// Stateless functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace distflow {

struct Partition {
  std::string device;
  std::string task;  // the device's /job:J/replica:R/task:T part
  proto::GraphDef graph;
  std::vector<std::string> feeds;    // tensor names fed into this partition
  std::vector<std::string> fetches;  // tensor names fetched from it
  std::vector<std::string> targets;  // nodes to run (including its _Send nodes)
  // Its task may answer the step before its remaining variable updates have
  // run (placement/deferred_updates.h: MarkDeferredUpdates sets it).
  bool defer_updates = false;
};

struct PartitionOptions {
  // The step defers its variable updates (placement/deferred_updates.h):
  // a node waits for no update on another device that it need not see.
  // Ignored for a step with control flow.
  bool defer_updates = false;
};

// True if everything `p` does flows into its _Send nodes: no fetches, only
// _Send targets, and every node upstream of a _Send. Once its consumers have
// received every tensor it sends, such a partition has nothing left to do, so
// a step need not wait for its RunGraph answer to succeed (only for errors).
bool OnlyFeedsOtherPartitions(const Partition& p);

// Prefetched variable reads (docs/PERFORMANCE.md, "Prefetching the next
// step's variables"). A step that runs a node with the attribute
// kPrefetchVariableReadsAttr = true (distflow/train/prefetch.h makes one)
// lets its workers read the variables it updates one step early.
inline constexpr char kPrefetchVariableReadsAttr[] = "_prefetch_variable_reads";
// Set on such a _Recv: the worker may answer it with the value it received
// for the same key in its previous step, while this step's value comes.
inline constexpr char kPrefetchRecvAttr[] = "_prefetch";

// True if one of the step's nodes asks for prefetched variable reads.
bool StepAllowsStaleReads(const std::vector<const Node*>& nodes);

// Marks with kPrefetchRecvAttr each _Recv of `parts` that receives, from
// another task, the read of a variable (its value: `Variable` itself or an
// Identity of it) that the same step updates (an Apply*, SparseApply*, FusedApply*,
// Assign* or Scatter* op takes it by reference): a model's weights in a
// training step. Receives inside loops or with control flow stay
// unmarked. Returns how many were marked.
int MarkPrefetchableReads(const std::vector<const Node*>& nodes, std::map<std::string, Partition>* parts);

// Splits the placed nodes into per-device partitions.
absl::StatusOr<std::map<std::string, Partition>> PartitionGraph(
    const Graph& graph, const std::vector<const Node*>& nodes, const std::vector<std::string>& placement,
    const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches, const std::vector<std::string>& targets,
    const PartitionOptions& options = {});

}  // namespace distflow
