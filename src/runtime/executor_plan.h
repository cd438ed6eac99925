// What Executor::Create works out once per (feeds, fetches, targets)
// signature and every step of the executor reads: the nodes the step needs
// (everything the fetches and targets depend on, not looking past fed
// tensors) in graph order, their kernels, where each node's outputs go, and
// where each feed goes and each fetch comes from. On the control-flow path it
// also holds the static frames (control_flow_info.h). Internal to runtime/.
//
// Immutable once built; shared by every step without a lock.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"
#include "kernels/device.h"
#include "runtime/executor.h"
#include "runtime/executor_items.h"

namespace distflow {

struct ExecutorPlan {
  std::vector<NodeItem> items;  // the nodes the signature needs, in graph (topological) order
  int total_slots = 0;          // input slots of every item (the acyclic path's step slots)
  std::vector<TensorId> feeds;
  std::vector<const Node*> feed_nodes;
  std::vector<std::vector<int>> feed_slots;  // per feed: slots to fill
  std::vector<std::vector<int>> feed_items;  // per feed: items whose pending count drops
  // Where a fetch comes from: a feed (`feed` >= 0), or an item's output.
  struct FetchSrc {
    int feed = -1;
    int item = -1;
    int output = 0;
  };
  std::vector<FetchSrc> fetches;
  // Items marked `outward` (0 on the control-flow path, which never reports
  // its outputs early).
  int num_outward = 0;
  // The control-flow path (the graph has Switch, Merge or loop nodes): the
  // static frames (0: the root), and the root items with nothing to wait for.
  bool control_flow = false;
  // The graph makes per-step resources (TensorArrays): the step's container
  // is dropped when it ends.
  bool step_resources = false;
  std::vector<FrameInfo> frames;
  std::vector<int> root_ready;
};

// Builds `plan` (empty on entry) for running `graph` on `device` with the
// kernels of `kernels`. NotFound names a feed, fetch or target that is not in
// the graph (with the closest names) or an output a node does not have;
// InvalidArgument a tensor fed twice; and the errors of creating a kernel or
// of checking the graph's loops.
absl::Status BuildExecutorPlan(const Graph& graph, Device* device, KernelCache* kernels,
                               const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches,
                               const std::vector<std::string>& targets, ExecutorPlan* plan);

}  // namespace distflow
