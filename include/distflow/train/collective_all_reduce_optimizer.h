// Synchronous data-parallel training without parameter servers: every
// worker holds a replica of every variable, and each step averages the
// workers' gradients with a collective all-reduce (CollectiveReduce, the
// ring for large gradients) before the wrapped optimizer applies them, so
// the replicas stay identical. Horovod's DistributedOptimizer, or TF's
// CollectiveAllReduceStrategy, in TF1 graph form.
//
//   auto opt = CollectiveAllReduceOptimizer::Create(std::make_unique<AdamOptimizer>(1e-3),
//                                                   {.num_replicas = 3, .rank = task});
//   auto train = (*opt)->Minimize(worker_scope, loss, &global_step);
//   auto bcast = (*opt)->BroadcastVariables(worker_scope);   // rank 0's initial values
//   SupervisorOptions sv;  sv.local_init_op = *bcast;         // after each worker's init
//
// Every worker builds the same graph (same variables, same order) on its own
// task ("/job:worker/task:N"); the group is the job's tasks 0..num_replicas-1
// and the rank is the task index. A collective's peer that dies fails the
// step on the others with an error naming it (see docs/COLLECTIVES.md). Not
// thread-safe (like Scope).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/train/optimizer.h"

namespace distflow {

struct DISTFLOW_EXPORT CollectiveAllReduceOptions {
  // Workers in the group (the job's tasks 0..num_replicas-1); at least 1.
  int num_replicas = 1;
  // This worker's rank (its task index), in [0, num_replicas).
  int rank = 0;
  // The group's key, and the first instance key this optimizer uses: the
  // gradient of variable i is instance first_instance_key + i, its initial
  // value's broadcast first_instance_key + kBroadcastOffset + i. Two
  // optimizers in one group need disjoint ranges.
  int64_t group_key = 1;
  int64_t first_instance_key = 1;
  // Average the gradients (Div by num_replicas) or sum them.
  bool average = true;
  // A collective not finished after this long fails the step (0: only the
  // step's own deadline).
  double timeout_seconds = 0;
};

class DISTFLOW_EXPORT CollectiveAllReduceOptimizer {
 public:
  static constexpr int64_t kBroadcastOffset = 1 << 20;

  // InvalidArgument if num_replicas < 1 or rank is out of range.
  static absl::StatusOr<std::unique_ptr<CollectiveAllReduceOptimizer>> Create(std::unique_ptr<Optimizer> optimizer,
                                                                              CollectiveAllReduceOptions options);

  absl::StatusOr<Optimizer::GradsAndVars> ComputeGradients(const Scope& scope, const Output& loss,
                                                           const std::vector<Output>& var_list = {}) {
    return optimizer_->ComputeGradients(scope, loss, var_list);
  }
  // Each valid gradient all-reduced across the group (in the order of
  // `grads_and_vars`, which must be the same on every worker), then applied
  // by the wrapped optimizer. Gradients of float32 or float64; an
  // IndexedSlices gradient is reduced in its dense form.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope, const Optimizer::GradsAndVars& grads_and_vars,
                                           const Output* global_step = nullptr);
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss, const Output* global_step = nullptr,
                                     const std::vector<Output>& var_list = {});
  // Rank 0 sends the values of `vars` (empty: the scope's trainable
  // variables) and every other rank assigns what it receives: run once
  // after initialisation (SupervisorOptions::local_init_op) so the replicas
  // start equal. Every variable needs a fully defined shape.
  absl::StatusOr<Operation> BroadcastVariables(const Scope& scope, const std::vector<Output>& vars = {});

  const CollectiveAllReduceOptions& options() const { return options_; }
  Optimizer* wrapped() const { return optimizer_.get(); }

 private:
  CollectiveAllReduceOptimizer(std::unique_ptr<Optimizer> optimizer, CollectiveAllReduceOptions options)
      : optimizer_(std::move(optimizer)), options_(options) {}
  std::unique_ptr<Optimizer> optimizer_;
  const CollectiveAllReduceOptions options_;
};

}  // namespace distflow
