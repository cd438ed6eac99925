// Placement of a step's graph on the cluster's devices (partition.h then
// cuts it into one graph per device).
//
// PlaceNodes gives every node a device: its requested device (merged across a
// colocation group: an op that reads or writes a variable through a reference
// goes where the variable is) resolved against the devices that exist;
// unconstrained nodes go to the default device (the task the client's session
// is on). An impossible request is an error naming the node, the request, the
// devices that exist and the soft-placement fix; with allow_soft_placement it
// falls back to the same task, then to the default device.
//
// Stateless functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

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

// The nodes a step needs: everything fetches and targets depend on, not
// looking past fed tensors, plus the fed nodes themselves. Unknown names are
// NotFound with suggestions.
absl::StatusOr<std::vector<const Node*>> PruneForStep(const Graph& graph, const std::vector<TensorId>& feeds,
                                                      const std::vector<TensorId>& fetches,
                                                      const std::vector<std::string>& targets);

}  // namespace distflow
