// GraphState: what every Scope of one graph shares (the graph, its first
// error, the names used so far, initializers, trainable and local variables).
// Internal to distflow: scopes hold it through a shared_ptr; ops, gradients,
// sessions and optimizers read it under its mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/while_loop_record.h"
#include "distflow/scope.h"
#include "graph/graph.h"

namespace distflow {

// What every Scope of one graph shares.
struct GraphState {
  absl::Mutex mu;
  Graph graph ABSL_GUARDED_BY(mu);
  absl::Status status ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, int> name_counts ABSL_GUARDED_BY(mu);
  // Kept as nodes, not Operations/Outputs: those hold the GraphState, and a
  // GraphState holding them would never be freed.
  std::vector<const Node*> initializers ABSL_GUARDED_BY(mu);
  struct Variable {
    const Node* node = nullptr;
    int index = 0;
    Scope scope;  // the scope the variable was made in, without its graph or control dependencies
  };
  std::vector<Variable> trainable_variables ABSL_GUARDED_BY(mu);
  // Variables made with VariableOptions::local (TF's LOCAL_VARIABLES).
  std::vector<const Node*> local_variables ABSL_GUARDED_BY(mu);
  // Loops made by ops::WhileLoop, by each of their Exit nodes, for
  // Gradients. (A body function that captures Outputs keeps the graph alive.)
  absl::flat_hash_map<const Node*, std::shared_ptr<const WhileLoopRecord>> while_loops ABSL_GUARDED_BY(mu);
  // Loops whose condition or body is being built, innermost last: where
  // ops::CaptureIntoLoop enters a tensor from outside, and what the loop's
  // record then lists among its invariants.
  struct LoopInConstruction {
    explicit LoopInConstruction(Scope s) : enter_scope(std::move(s)) {}
    std::string frame;
    int parallel_iterations = 10;
    Scope enter_scope;             // where the loop's own Enters were made
    std::vector<NodeOut> outer;    // captured tensors, in the order captured
    std::vector<NodeOut> entered;  // their Enters
    // The random ops (IsRandomOp) made in this loop's body itself (also in
    // a branch of a Cond there), not in a loop nested in it, in the order
    // made: the forward loop saves their values for its gradient.
    std::vector<const Node*> random_ops;
    // Per loop nested in this one's body (made in the order built): the
    // arrays it saves its draws in (WhileLoopRecord::randoms), which it
    // makes in this loop's frame, a new one every iteration. This loop saves
    // their handles, so its own gradient can replay the nested draws.
    std::vector<std::vector<SavedValues>> nested_draws;
  };
  std::vector<std::shared_ptr<LoopInConstruction>> loops_in_construction ABSL_GUARDED_BY(mu);
  // While a loop's gradient rebuilds its body inside the backward loop
  // (`frame`): the values the forward loop's random ops drew in this
  // iteration, in the order they were made. The rebuilt body's random ops,
  // made in that order, become reads of them (a Dropout: DropoutMasked on
  // its saved mask), so the gradient sees the forward's draws instead of
  // new ones (TensorFlow keeps forward values on stacks for the same reason).
  // Its TensorArray writes are marked as rewrites (`_rewrite`): they write
  // what the forward loop wrote again.
  // A loop nested in the rebuilt body replays its draws from the arrays the
  // forward's nested loop saved in this iteration (`nested`: per nested
  // loop, per array, the array of its handles and, in `nested_draws`, the
  // draws' dtype and shape).
  struct RandomReplay {
    std::string frame;
    NodeOut index;                   // the iteration's index in the forward loop
    std::vector<SavedValues> draws;  // the arrays of the draws (entered into the backward loop)
    size_t next = 0;
    std::vector<std::vector<SavedValues>> nested, nested_draws;
    size_t next_nested = 0;
  };
  std::vector<std::shared_ptr<RandomReplay>> random_replays ABSL_GUARDED_BY(mu);
  int64_t graph_seed ABSL_GUARDED_BY(mu) = 0;
  int64_t next_op_seed ABSL_GUARDED_BY(mu) = 1;
};
// Whether `op` draws random numbers (RandomUniform, RandomStandardNormal,
// TruncatedNormal, Dropout).
bool IsRandomOp(const std::string& op);

}  // namespace distflow
