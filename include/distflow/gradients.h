// Symbolic gradients: Gradients(ys, xs) adds the backward graph of ys with
// respect to xs to the scope's graph and returns one Output per x.
//
// Each differentiable op has a gradient function in the GradientRegistry,
// registered by explicit functions (RegisterStandardGradients). Fan-out is
// summed with AddN; paths that do not reach xs are skipped; StopGradient and
// integer-typed outputs stop gradients; an op on the path without a gradient
// function is an error naming it. Gradient ops are colocated with their
// forward op (same requested device) unless options say otherwise.
//
// An x that no y depends on gets an invalid Output (ok() == false), as TF
// returns None. Thread-safety: like Scope (one builder thread per graph).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distflow/export.h"
#include "distflow/ops.h"
#include "distflow/scope.h"

namespace distflow {

struct DISTFLOW_EXPORT GradientOptions {
  // Put each gradient op on the device its forward op asked for.
  bool colocate_gradients_with_ops = true;
  // Give the gradient ops the scope's control dependencies (a while loop's
  // gradient builds its body's gradient inside the backward loop this way).
  bool keep_control_dependencies = false;
};

// d(sum of ys)/d xs. `grad_ys`, if given, has one Output per y (the upstream
// gradient); otherwise ones are used.
DISTFLOW_EXPORT absl::StatusOr<std::vector<Output>> Gradients(const Scope& scope, const std::vector<Output>& ys,
                                                              const std::vector<Output>& xs,
                                                              const std::vector<Output>& grad_ys = {},
                                                              const GradientOptions& options = {});

// A gradient that touches some rows of its variable only (TF's
// IndexedSlices): row values[i] belongs to row indices[i] of a tensor with
// num_rows rows; duplicate rows add up. The gradients of Gather,
// embedding lookups and SparseSegmentSum are of this kind. In the graph such
// a gradient is one dense Output, UnsortedSegmentSum(values, indices,
// num_rows) marked "_indexed_slices": a dense consumer uses it as is (the
// gradient is densified only where it is needed), while an optimizer reads
// the parts through AsIndexedSlices and applies a sparse update, so the dense
// node never runs and only the touched rows travel to the variable's task.
// Gradients() sums several sparse gradients of one tensor by concatenating
// their parts (up to kMaxConcatenatedSlices of them; more, or any dense
// one among them, are summed densely with AddN).
struct DISTFLOW_EXPORT IndexedSlices {
  Output values;    // [n, row shape...]
  Output indices;   // [n], int32 or int64
  Output num_rows;  // int32 or int64 scalar
};
inline constexpr int kMaxConcatenatedSlices = 64;

// The dense form of `slices`, marked so AsIndexedSlices finds the parts.
DISTFLOW_EXPORT Output IndexedSlicesGradient(const Scope& scope, const IndexedSlices& slices);
// The parts of a gradient made by IndexedSlicesGradient; false for any other Output.
DISTFLOW_EXPORT bool AsIndexedSlices(const Output& grad, IndexedSlices* slices);

// A gradient function: given the forward op and the gradients of its outputs
// (invalid Outputs for outputs nothing depends on), appends one gradient per
// data input to `grad_inputs` (an invalid Output for inputs with no gradient).
using GradFunc = std::function<absl::Status(const Scope& scope, const Operation& op,
                                            const std::vector<Output>& grad_outputs, std::vector<Output>* grad_inputs)>;

class DISTFLOW_EXPORT GradientRegistry {
 public:
  // The process-wide registry with every standard gradient function.
  static GradientRegistry* Global();

  void Register(const std::string& op, GradFunc fn);
  // Marks an op as having no gradient (its inputs get none): Shape, ArgMax, ...
  void RegisterNoGradient(const std::string& op);
  // nullptr if the op has no entry; *no_gradient set for RegisterNoGradient ops.
  const GradFunc* Find(const std::string& op, bool* no_gradient) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, GradFunc> funcs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> no_grad_ ABSL_GUARDED_BY(mu_);
};

// Registers the gradient functions of every standard op family.
DISTFLOW_EXPORT void RegisterStandardGradients(GradientRegistry* r);

}  // namespace distflow
