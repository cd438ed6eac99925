// Conditionals and loops for graphs built in C++, in TensorFlow's dataflow
// form (Switch/Merge; Enter/Merge/LoopCond/Switch/NextIteration/Exit), which
// the executor runs with frames and iterations.
//
//   // y = pred ? x * x : -x
//   auto y = ops::Cond(root, pred, {x},
//       [](const Scope& s, const std::vector<Output>& in) -> absl::StatusOr<std::vector<Output>> {
//         return std::vector<Output>{in[0] * in[0]}; },
//       [](const Scope& s, const std::vector<Output>& in) -> absl::StatusOr<std::vector<Output>> {
//         return std::vector<Output>{-in[0]}; });
//
//   // for (i = 0; i < n; ++i) acc += i
//   auto out = ops::WhileLoop(root, {zero, zero},
//       [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], n_in);
//       },
//       ...);
//
// Tensors a branch or a loop uses must come in through `inputs` (a Cond) or
// `WhileOptions::invariants` (a loop): those are switched or entered, so that
// their gradients flow back; every node a branch or body adds runs after the
// branch's pivot, so constants there are dead with the branch. Errors (branches
// of different structure, a loop variable whose shape changes without an
// invariant) name the Cond or loop and the culprit, and go to the scope too.
//
// Thread-safety: like Scope (one builder thread per graph).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/partial_shape.h"
#include "distflow/scope.h"

namespace distflow {
namespace ops {

// A branch: given the Cond's inputs as seen on that branch, its outputs.
using BranchFn = std::function<absl::StatusOr<std::vector<Output>>(const Scope&, const std::vector<Output>& inputs)>;

// tf.cond: `pred` a scalar bool. Both branches must return as many outputs,
// of the same dtypes; the result has one Output per branch output.
DISTFLOW_EXPORT absl::StatusOr<std::vector<Output>> Cond(const Scope& s, const Output& pred,
                                                         const std::vector<Output>& inputs, const BranchFn& true_fn,
                                                         const BranchFn& false_fn);

// A loop's condition and body: given the loop variables (then the invariants).
using LoopCondFn = std::function<absl::StatusOr<Output>(const Scope&, const std::vector<Output>& vars)>;
using LoopBodyFn = std::function<absl::StatusOr<std::vector<Output>>(const Scope&, const std::vector<Output>& vars)>;

struct DISTFLOW_EXPORT WhileOptions {
  std::string name = "while";       // the loop's name scope and frame name (made unique)
  int parallel_iterations = 10;     // iterations that may run at once
  int64_t maximum_iterations = -1;  // -1: no limit; else the loop also stops after this many
  // One per loop variable, or empty: the shapes each variable may take
  // (unknown dimensions may change); without one a variable's shape must
  // stay the same.
  std::vector<PartialShape> shape_invariants;
  // Tensors from outside the loop that the condition and body read (they see
  // them after the loop variables); their values are the same every iteration.
  std::vector<Output> invariants;
  // Keep what the loop's gradient needs: every iteration's values of the
  // loop variables (written to TensorArrays, one write per iteration, no
  // copy) and the iteration count. Gradients through the loop need it (and
  // every variable's rank known); false saves the memory.
  bool back_prop = true;
  // Asked, once the body is built, for each loop variable (its index): true
  // if the gradient never needs the variable's values, only its shape, and
  // the shape is the same every iteration (an array the body only writes
  // to). Such a variable keeps no history: the gradient's rebuilt body sees
  // zeros shaped like its final value. Unset: every variable keeps one.
  std::function<bool(int var)> history_not_needed;
  // One per loop variable, or empty (all false): the variable's shape may
  // change from one iteration to the next (a dynamic_size TensorArray's
  // flow). If history_not_needed says so the loop keeps its shapes (the
  // rebuilt body sees zeros of each iteration's shape); else it keeps each
  // iteration's value, of that iteration's shape.
  std::vector<bool> shape_varies;
};

// tf.while_loop: runs body while cond holds; returns the loop variables'
// final values. With back_prop, Gradients calls `body` again later (to build
// the gradient's loop), so it must not capture references to locals that are
// gone by then; capture Outputs by value. What back_prop keeps costs one
// TensorArray write per variable and iteration (linear in the iterations).
DISTFLOW_EXPORT absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& s, const std::vector<Output>& loop_vars,
                                                              const LoopCondFn& cond, const LoopBodyFn& body,
                                                              const WhileOptions& options = {});

// Inside a WhileLoop's condition or body (`s` the scope they were given):
// `outer`, a tensor of the frame around the loop, entered into the loop as
// one more invariant, the same every iteration. Gradients sum its gradient
// over the iterations and pass it to `outer`, as for WhileOptions::
// invariants; when Gradients rebuilds the body, the captured tensors come
// after WhileOptions::invariants in its `vars`, in the order captured.
// Capturing the same tensor twice gives the same Output. (Python's
// tf.while_loop enters the tensors a body reads from outside this way.)
DISTFLOW_EXPORT absl::StatusOr<Output> CaptureIntoLoop(const Scope& s, const Output& outer);

}  // namespace ops
}  // namespace distflow
