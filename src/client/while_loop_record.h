// What ops::WhileLoop remembers of a loop for its gradient, kept in the
// graph's GraphState by each of its Exit nodes. Internal to client/.
//
// The gradient is TensorFlow's in substance: the forward loop also writes
// each iteration's values of the loop variables to TensorArrays (TF: stacks;
// a write keeps the value without copying it, so the history costs O(1) per
// iteration) and counts the iterations; the backward loop runs
// k = N-1 .. 0, reads iteration k's values back, rebuilds the body on them
// and back-propagates through it (Gradients inside the loop's frame),
// carrying the variables' gradients from one iteration to the one before and
// summing the invariants'.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "distflow/control_flow.h"
#include "graph/graph.h"

namespace distflow {

// A TensorArray (made outside the loop) holding a value of every iteration:
// its handle and flow, its elements' dtype and their shape as far as known.
struct SavedValues {
  NodeOut handle, flow;
  DataType dtype = DT_FLOAT;
  PartialShape shape = PartialShape::Unknown();
  bool ok() const { return handle.node != nullptr; }
};

struct WhileLoopRecord {
  std::string name;
  std::vector<const Node*> exits;  // one per loop variable
  std::vector<NodeOut> loop_vars;  // their initial values
  std::vector<NodeOut> invariants;
  // Per loop variable: every iteration's value (with shape_history: its
  // shape, an int32 vector), or none (!ok(): zeros_for without a shape
  // history, where the body is rebuilt on zeros of the final value's shape).
  std::vector<SavedValues> histories;
  std::vector<bool> zeros_for;      // per loop variable: the body is rebuilt on zeros of its shape
  std::vector<bool> shape_history;  // per loop variable: its history holds shapes
  // Per random op of the body (GraphState::RandomReplay): its value of
  // every iteration.
  std::vector<SavedValues> randoms;
  // Per loop nested in the body (LoopInConstruction::nested_draws): per
  // array of its draws, that array's handle of every iteration (`nested`),
  // and the draws' dtype and shape (`nested_draws`).
  std::vector<std::vector<SavedValues>> nested, nested_draws;
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
