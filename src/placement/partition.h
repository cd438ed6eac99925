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
};

// True if everything `p` does flows into its _Send nodes: no fetches, only
// _Send targets, and every node upstream of a _Send. Once its consumers have
// received every tensor it sends, such a partition has nothing left to do, so
// a step need not wait for its RunGraph answer to succeed (only for errors).
bool OnlyFeedsOtherPartitions(const Partition& p);

// Splits the placed nodes into per-device partitions.
absl::StatusOr<std::map<std::string, Partition>> PartitionGraph(
    const Graph& graph, const std::vector<const Node*>& nodes, const std::vector<std::string>& placement,
    const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches, const std::vector<std::string>& targets);

}  // namespace distflow
