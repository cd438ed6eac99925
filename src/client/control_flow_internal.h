// What ops::Cond (cond.cc), ops::WhileLoop (while_loop.cc) and a loop's
// gradient (while_loop_grad.cc) share: node helpers and the arrays a loop
// saves its values of every iteration in for the gradient
// (control_flow_internal.cc). Internal to client/; thread-safety as Scope.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/graph_state.h"
#include "distflow/ops.h"

namespace distflow {
namespace ops {
namespace cf {

// Output `index` of a new `op` node.
Output Op(const Scope& s, const std::string& op, const std::vector<Output>& in,
          const std::function<void(proto::NodeDef*)>& attrs = nullptr, int index = 0);

// Records `st` in the scope too, so a Session run reports it.
absl::Status Fail(const Scope& s, absl::Status st);

// The "name" a Cond or loop is known by in errors: its name scope.
std::string ScopeName(const Scope& s);

// `x` entered into loop frame `frame` (a constant: the same every iteration).
Output Enter(const Scope& s, const Output& x, const std::string& frame, bool constant, int parallel,
             const PartialShape* invariant);

// A TensorArray a loop writes a value to every iteration, at the
// iteration's index, for its gradient to read back (WhileLoopRecord).
struct IterationArrayBuilder {
  Scope outer;  // where the array is made: the frame around the loop
  Scope body;   // where the writes go
  std::string frame;
  int parallel = 10;
  Output count;  // the iteration's index, in the body
};
// Makes the array and writes `value` (of `shape` every iteration, as far as
// known) to it; `*saved` says where to read it back. Returns the write.
Operation SaveEachIteration(const IterationArrayBuilder& b, const Output& value, const PartialShape& shape,
                            SavedValues* saved);

// The element `k` of a saved array, read in the backward loop (`handle` and
// `flow` the array's, entered there).
Output ReadSaved(const Scope& s, const SavedValues& saved, const Output& handle, const Output& k, const Output& flow);

// Each of `values` (made in the body, maybe in a Cond's branch there) of
// every iteration, saved (SaveEachIteration; in a branch, when the branch
// runs). Returns what the loop's next iteration waits for.
std::vector<Operation> SaveValues(const IterationArrayBuilder& b, const std::vector<Output>& values,
                                  std::vector<SavedValues>* saved);

// For each random op the body made (LoopInConstruction::random_ops): its
// value of every iteration, saved (SaveValues).
std::vector<Operation> SaveRandomValues(const IterationArrayBuilder& b, const GraphState::LoopInConstruction& loop,
                                        std::vector<SavedValues>* saved);

// For each array of draws a loop nested in the body saves
// (LoopInConstruction::nested_draws): its handle of every iteration, saved
// (in `handles`; `draws` gets the arrays themselves).
std::vector<Operation> SaveNestedDraws(const IterationArrayBuilder& b, const GraphState::LoopInConstruction& loop,
                                       std::vector<std::vector<SavedValues>>* handles,
                                       std::vector<std::vector<SavedValues>>* draws);

}  // namespace cf
}  // namespace ops
}  // namespace distflow
