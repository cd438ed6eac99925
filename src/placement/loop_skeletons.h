// Loops whose body spans devices, in a partitioned graph (TensorFlow's
// graph_partition AddControlFlow, in substance). A _Recv made for an edge
// inside a loop has no input of the loop, so by itself it would run once, in
// the root frame. LoopSkeletons gives it a control input from a small control
// loop of its own device for that frame: Enter(const) -> Merge ->
// Switch(on the loop's LoopCond, sent from its device every iteration) ->
// Identity (the pivot) -> NextIteration -> Merge. The pivot is live once per
// iteration while the loop runs, so the _Recv runs in the loop's frame and
// every iteration (the executor adds the frame and iteration to its key), and
// is dead when the loop ends. Nested loops nest their skeletons.
//
// Used by PartitionGraph only; not thread-safe (one per partitioning).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "placement/partition.h"

namespace distflow {

class LoopSkeletons {
 public:
  using PartitionOf = std::function<Partition&(const std::string& device)>;

  // The frames the nodes of `nodes` run in (`placement` by node id).
  LoopSkeletons(const Graph& graph, const std::vector<const Node*>& nodes, const std::vector<std::string>& placement,
                PartitionOf part_of);

  // "" if `consumer` runs in the root frame; else the control input ("^name")
  // that puts a _Recv on `device` feeding it into its frame and iteration,
  // adding the device's skeletons to its partition on first use.
  absl::StatusOr<std::string> RecvControl(const Node* consumer, const std::string& device);

 private:
  struct Frame {
    std::string name;
    int parent = 0;
    int64_t parallel_iterations = 10;
    const Node* loop_cond = nullptr;
  };
  // The pivot of frame `f`'s skeleton on `device`, made on first use.
  absl::StatusOr<std::string> Pivot(int f, const std::string& device);

  const std::vector<std::string>& placement_;
  PartitionOf part_of_;
  std::vector<Frame> frames_;   // 0: the root
  std::vector<int> run_frame_;  // by node id
  std::map<std::pair<int, std::string>, std::string> pivots_;
  int counter_ = 0;
};

}  // namespace distflow
