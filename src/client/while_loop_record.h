// What ops::WhileLoop remembers of a loop for its gradient, kept in the
// graph's GraphState by each of its Exit nodes. Internal to client/.
//
// The gradient is TensorFlow's in substance with history instead of stacks:
// the forward loop also appends each iteration's values of the loop
// variables to a history (a [N, ...] tensor per variable) and counts the
// iterations; the backward loop runs k = N-1 .. 0, takes iteration k's values
// from the histories, rebuilds the body on them and back-propagates through
// it (Gradients inside the loop's frame), carrying the variables' gradients
// from one iteration to the one before and summing the invariants'.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "distflow/control_flow.h"
#include "graph/graph.h"

namespace distflow {

struct WhileLoopRecord {
  std::string name;
  std::vector<const Node*> exits;  // one per loop variable
  std::vector<NodeOut> loop_vars;  // their initial values
  std::vector<NodeOut> invariants;
  std::vector<NodeOut> histories;   // per loop variable: every iteration's value, stacked
  std::vector<bool> zeros_for;      // per loop variable: the body is rebuilt on zeros of its shape
  std::vector<bool> shape_history;  // per loop variable: its history holds shapes ([N, rank] int32)
  std::vector<bool> no_history;     // per loop variable: none kept (its shape varies, its values are read)
  // Per random op of the body (GraphState::RandomReplay): a TensorArray
  // (handle and flow, made outside the loop) holding its value of each
  // iteration, and the value's shape.
  std::vector<NodeOut> random_handles, random_flows;
  std::vector<PartialShape> random_shapes;
  NodeOut count;                         // the number of iterations that ran
  std::vector<PartialShape> var_shapes;  // the variables' shapes inside the loop
  int parallel_iterations = 10;
  ops::LoopBodyFn body;
};

// Builds the backward loop of `loop` in `s`: given the gradients of its
// exits (invalid: none), the gradients of its initial values and invariants
// (invalid where none flows).
absl::Status BuildWhileLoopGradient(const Scope& s, const WhileLoopRecord& loop, const std::vector<Output>& exit_grads,
                                    std::vector<Output>* var_grads, std::vector<Output>* invariant_grads);

}  // namespace distflow
