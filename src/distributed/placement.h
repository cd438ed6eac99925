// Placement and partitioning of a step's graph across the cluster's devices.
//
// PlaceNodes gives every node a device: its requested device (merged across a
// colocation group: an op that reads or writes a variable through a reference
// goes where the variable is) resolved against the devices that exist;
// unconstrained nodes go to the default device (the task the client's session
// is on). An impossible request is an error naming the node, the request, the
// devices that exist and the soft-placement fix; with allow_soft_placement it
// falls back to the same task, then to the default device.
//
// PartitionGraph splits the placed nodes per device and inserts a _Send/_Recv
// pair on every edge that crosses devices (control edges too), so that each
// partition is a self-contained GraphDef a worker can run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "runtime/executor.h"

namespace distflow {

struct PlacementOptions {
  std::vector<std::string> devices;  // full names of the devices that exist
  std::string default_device;        // where unconstrained nodes go
  bool allow_soft_placement = false;
  bool log_device_placement = false;
};

// Devices for `nodes` (a subset of `graph`), indexed by node id (others empty).
absl::StatusOr<std::vector<std::string>> PlaceNodes(const Graph& graph, const std::vector<const Node*>& nodes,
                                                    const PlacementOptions& options);

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
absl::StatusOr<std::map<std::string, Partition>> PartitionGraph(const Graph& graph,
                                                                const std::vector<const Node*>& nodes,
                                                                const std::vector<std::string>& placement,
                                                                const std::vector<TensorId>& feeds,
                                                                const std::vector<TensorId>& fetches,
                                                                const std::vector<std::string>& targets);

// The nodes a step needs: everything fetches and targets depend on, not
// looking past fed tensors, plus the fed nodes themselves. Unknown names are
// NotFound with suggestions.
absl::StatusOr<std::vector<const Node*>> PruneForStep(const Graph& graph, const std::vector<TensorId>& feeds,
                                                      const std::vector<TensorId>& fetches,
                                                      const std::vector<std::string>& targets);

}  // namespace distflow
