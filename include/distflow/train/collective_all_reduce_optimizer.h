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
// Tensor fusion (Horovod's): small gradients share one collective. They are
// flattened and concatenated into buckets of at most fusion_threshold_bytes,
// each bucket is reduced by one CollectiveReduce and split back into the
// gradients' shapes. Buckets are filled from the last variable backwards,
// the order backprop produces gradients in, so a bucket's reduction can
// start while earlier layers' gradients are still being computed. Every
// element is reduced exactly as it would be alone (same ranks, same order
// for tensors below the ring's threshold and for 2 ranks), so fusion
// changes the number of collectives, not the bytes the replicas hold.
//
// With a cycle time (fusion_cycle_ms, Horovod's HOROVOD_CYCLE_TIME) the
// buckets are made at run time instead: every gradient has its own
// CollectiveReduce, and the gradients that become ready within one cycle
// are reduced together, as rank 0 decides (collective/fusion_buffer.h).
//
// Every worker builds the same graph (same variables, same order) on its own
// task ("/job:worker/task:N"); the group is the job's tasks 0..num_replicas-1
// and the rank is the task index. A collective's peer that dies fails the
// step on the others with an error naming it (see docs/COLLECTIVES.md). Not
// thread-safe (like Scope).
#pragma once

#include <memory>
#include <optional>
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
  // b-th bucket of gradients is instance first_instance_key + b (at most
  // one per gradient), variable i's initial value's broadcast
  // first_instance_key + kBroadcastOffset + i. Two optimizers in one group
  // need disjoint ranges.
  int64_t group_key = 1;
  int64_t first_instance_key = 1;
  // Average the gradients (Div by num_replicas) or sum them.
  bool average = true;
  // A collective not finished after this long fails the step (0: only the
  // step's own deadline).
  double timeout_seconds = 0;
  // Tensor fusion: gradients of one dtype are reduced together in buckets
  // of up to this many bytes (Horovod's HOROVOD_FUSION_THRESHOLD, whose
  // default this is); 0 reduces every gradient on its own. A gradient
  // larger than the threshold, or of a shape not known when the graph is
  // built, is reduced on its own.
  int64_t fusion_threshold_bytes = int64_t{64} << 20;
  // Horovod's cycle time (HOROVOD_CYCLE_TIME), in milliseconds: > 0 fuses
  // at run time instead of into buckets fixed when the graph is built.
  // Each gradient gets its own CollectiveReduce, and rank 0 fuses those
  // that become ready within one cycle of each other (up to the threshold,
  // in the order they came; at once when all of the step's have come) and
  // tells the others, so a fused reduction never waits for a gradient that
  // is still being computed (docs/COLLECTIVES.md, "Tensor fusion"). 0: the
  // graph-time buckets. Unset: DISTFLOW_FUSION_CYCLE_MS if set, else 0.
  // Ignored when the threshold is 0 or with adasum.
  std::optional<double> fusion_cycle_ms;
  // Horovod's Compression.fp16: the gradients travel between workers as
  // fp16 and are rounded to fp16 (CollectiveReduce's compression="fp16";
  // docs/COLLECTIVES.md says how), halving the bytes of float32 gradients.
  // The fusion threshold still counts the gradients' own bytes.
  bool fp16_compression = false;
  // Horovod's process sets: the group is these tasks of the job, in rank
  // order (num_replicas of them; `rank` is this worker's position here).
  // Empty: tasks 0..num_replicas-1.
  std::vector<int64_t> group_members;
  // Horovod's Adasum (op=hvd.Adasum): gradients combined by adaptive
  // summation (CollectiveReduce merge_op="Adasum"; docs/COLLECTIVES.md)
  // instead of summed; `average` is then ignored, and every gradient is
  // reduced alone (its dot products span that gradient only), whatever the
  // fusion threshold.
  bool adasum = false;
};

// Each valid gradient of `grads_and_vars` all-reduced across the group
// (fused into buckets as `options` say), paired with its variable; pairs
// without a gradient are returned as they are. The order, and so the
// instance keys, must be the same on every worker. Gradients of float32 or
// float64 (InvalidArgument naming the variable otherwise). What
// CollectiveAllReduceOptimizer::ApplyGradients reduces with; Horovod's
// DistributedOptimizer in Python uses it too.
// Every global variable of the scope's graph that has an initializer (made
// by MakeVariable, an optimizer's slots, the global step), in the order they
// were made: the same on every worker that built the same graph. Local
// variables (VariableOptions::local) are left out: each replica keeps its own.
DISTFLOW_EXPORT std::vector<Output> GraphVariables(const Scope& scope);

DISTFLOW_EXPORT absl::StatusOr<Optimizer::GradsAndVars> AllReduceGradients(
    const Scope& scope, const Optimizer::GradsAndVars& grads_and_vars, const CollectiveAllReduceOptions& options);

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
  // Each valid gradient all-reduced across the group (AllReduceGradients:
  // fused, in the order of `grads_and_vars`, which must be the same on every
  // worker), then applied by the wrapped optimizer. Gradients of float32 or
  // float64; an IndexedSlices gradient is reduced in its dense form.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope, const Optimizer::GradsAndVars& grads_and_vars,
                                           const Output* global_step = nullptr);
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss, const Output* global_step = nullptr,
                                     const std::vector<Output>& var_list = {});
  // The group's root sends the values of `vars` (empty: every variable of the graph
  // that has an initializer, GraphVariables: the model's, the optimizers'
  // slots, the global step) and every other rank assigns what it receives:
  // run once after initialisation or restore (SupervisorOptions::local_init_op)
  // so the replicas start equal, also when only rank 0 restored a
  // checkpoint. The root is rank 0 at the start and, once the group was
  // rebuilt after a rank died and came back, the lowest of the ranks that
  // kept running (their state is the newest; docs/COLLECTIVES.md), so
  // running it again after every recovery (as local_init_op is) gives a
  // restarted rank the survivors' values. Every variable needs a fully defined shape and a dtype the
  // collectives carry (float32, float64, int32, int64).
  // root_rank >= 0 (Horovod's root_rank) fixes the sender instead: rank
  // root_rank of the group, at the start and after every rebuild alike
  // (InvalidArgument naming it and num_replicas if it is not a rank).
  static constexpr int kGroupRoot = -1;
  absl::StatusOr<Operation> BroadcastVariables(const Scope& scope, const std::vector<Output>& vars = {},
                                               int root_rank = kGroupRoot);

  const CollectiveAllReduceOptions& options() const { return options_; }
  Optimizer* wrapped() const { return optimizer_.get(); }

 private:
  CollectiveAllReduceOptimizer(std::unique_ptr<Optimizer> optimizer, CollectiveAllReduceOptions options)
      : optimizer_(std::move(optimizer)), options_(options) {}
  std::unique_ptr<Optimizer> optimizer_;
  const CollectiveAllReduceOptions options_;
};

}  // namespace distflow
