// The static half of the executor's control-flow path: which frame (loop
// body) every node runs in, found from the Enter and Exit nodes the way
// TensorFlow does (a node is in its inputs' frame; Enter's consumers in the
// frame it names, Exit's in the parent), checked (inputs from two frames, an
// Exit or NextIteration outside any loop, a fetch from inside a loop), and
// each frame's nodes and input slots laid out. Internal to runtime/.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "graph/graph.h"
#include "runtime/executor_items.h"

namespace distflow {

// True if any item needs the control-flow path (Switch, Merge, loop nodes).
bool NeedsControlFlow(const std::vector<NodeItem>& items);

// Fills the control-flow fields of `items` (built from the graph's nodes in
// id order; `fed` tells whether an output of a node is fed) and `frames`
// (frames[0] is the root), and makes each item's input_start index its
// frame's slots. `roots` are the fetched and target nodes, which must be in
// the root frame.
absl::Status BuildControlFlowInfo(const Graph& graph, const std::vector<const Node*>& roots,
                                  std::vector<NodeItem>* items, std::vector<FrameInfo>* frames);

}  // namespace distflow
