// What the executor precomputes per node, shared by its acyclic path
// (executor.cc) and its control-flow path (executor_frames.cc). Internal to
// runtime/. Immutable once the executor is built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distflow/tensor.h"
#include "graph/graph.h"
#include "kernels/op_kernel.h"
#include "kernels/work_from_values.h"

namespace distflow {

class Var;

// A value on an edge: a tensor, or a variable reference.
struct Entry {
  Tensor val;
  std::shared_ptr<Var> ref;
};

// How the executor treats a node beyond running its kernel.
enum class CfKind : uint8_t {
  kNone,
  kSwitch,          // may leave an output unset: that output is dead
  kMerge,           // fires on its first live data input
  kEnter,           // outputs go to iteration 0 of a child frame (every iteration if constant)
  kExit,            // outputs go to the parent frame
  kNextIteration,   // outputs go to the next iteration; dead ones stop here
  kControlTrigger,  // never dead
};

struct NodeItem {
  const Node* node = nullptr;
  std::shared_ptr<OpKernel> kernel;
  int input_start = 0;                      // the first input slot (within its frame's slots on the control-flow path)
  std::vector<std::vector<int>> out_slots;  // per output: input slots of consumers
  std::vector<std::vector<int>> out_items;  // per output: the consumer items (parallel to out_slots)
  std::vector<std::vector<int>> out_fetches;  // per output: fetch indices
  std::vector<int> control_out;
  int initial_pending = 0;  // a Merge's: (control inputs << 1) | 1
  bool expensive = true;
  bool async = false;
  // The kernel, if it can estimate its work from input values (its
  // EstimatedWork cannot from shapes): kernels/work_from_values.h.
  const WorkFromValues* work_from_values = nullptr;
  std::string transfer_key;  // _Send/_Recv: their rendezvous key, for traces
  bool transfer = false;     // a _Send or _Recv: runs even when dead (it sends or takes "dead")
  // A _Send, a _Recv or a fetched node: the step's outputs are out once
  // every such node has finished (StepOptions::outputs_done).
  bool outward = false;

  // The control-flow path only.
  CfKind kind = CfKind::kNone;
  int frame = 0;         // the static frame the node runs in (0: the root)
  int local_id = 0;      // index among its frame's nodes
  int child_frame = -1;  // Enter: the frame it enters
  bool constant_enter = false;
  int merge_forward_inputs = 0;  // Merge: data inputs that are not back edges (all dead: dead)
};

// A loop body (a frame name of Enter nodes) as known before running.
struct FrameInfo {
  std::string name;
  int parent = -1;
  int parallel_iterations = 10;
  int num_items = 0;
  int num_slots = 0;
  int num_enters = 0;
  std::vector<int> items;  // by local id
  std::vector<int> exits;
};

}  // namespace distflow
