// SyncReplicasOptimizer: synchronous between-graph training (TensorFlow's
// tf.train.SyncReplicasOptimizer). Wraps any Optimizer; every worker builds
// the same graph with its own `replica_id`, and the chief also runs the hook.
//
//   SyncReplicasOptions sync;
//   sync.replicas_to_aggregate = 2;          // gradients averaged per step
//   sync.total_num_replicas = 3;             // workers; the slowest one is a backup
//   sync.replica_id = task_index;
//   auto opt = SyncReplicasOptimizer::Create(std::make_unique<AdamOptimizer>(1e-4), sync);
//   Operation train = *(*opt)->Minimize(scope, loss, &global_step);
//   hooks.push_back((*opt)->MakeSessionRunHook(is_chief));
//   auto session = MonitoredSession::Create(root, target, supervisor_options, std::move(hooks));
//   while (!session->ShouldStop()) session->Run(feeds, {}, {train});
//
// One step, as the graph runs it:
// - a worker reads the global step it works at (its local step) and the
//   variables, computes its gradients, and adds each to the variable's
//   conditional accumulator, on the variable's ps task. A gradient computed
//   at an older step than the accumulator's is dropped and counted; so is a
//   second one from the same replica for one step.
// - the worker then waits at the step barrier (on the global step's task)
//   until the chief has applied its step, and carries on at the new step. A
//   step that does not complete within `step_timeout` fails the worker's
//   run with DeadlineExceeded naming the step and the replicas that did not
//   report.
// - the chief's hook runs a background thread: once every accumulator holds
//   `replicas_to_aggregate` gradients it takes their averages, applies them
//   with the wrapped optimizer, adds one to the global step and releases the
//   barrier. Gradients that arrive after that are stale and dropped: with
//   total_num_replicas > replicas_to_aggregate, the slowest workers of a step
//   are backups whose work is dropped.
// When the chief's session is created or recreated (after a restore), the
// hook sets the accumulators and the barrier to the global step.
//
// Elastic (SyncReplicasOptions::live_replicas set): the number of gradients
// per step follows the workers in the job. Before each step the chief asks
// live_replicas how many workers are in the job now (LiveWorkerCounter in
// distflow/elastic.h asks the coordinator) and aggregates
// max(min_replicas, live - backups) gradients, backups being
// total_num_replicas - replicas_to_aggregate as configured. A worker that
// joins is waited for from the next step; one that leaves, or dies and is
// declared dead by the coordinator, is not waited for any more. A joined
// worker's replica_id is its task index, which may be total_num_replicas or
// more.
//
// Not thread-safe while building the graph (like Scope); the hook's thread
// runs its own Session on the same graph.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distflow/export.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/supervisor.h"

namespace distflow {

struct DISTFLOW_EXPORT SyncReplicasOptions {
  // Gradients averaged into one update; at least 1.
  int replicas_to_aggregate = 1;
  // Workers that compute gradients; 0: replicas_to_aggregate. More than
  // replicas_to_aggregate makes the slowest ones backups.
  int total_num_replicas = 0;
  // This worker, in [0, total_num_replicas); replica 0 is usually the chief.
  int replica_id = 0;
  // How long a worker waits for its step to be applied before giving up.
  absl::Duration step_timeout = absl::Minutes(2);
  // Elastic training: the number of workers in the job now (see above);
  // empty: a fixed replicas_to_aggregate. Called from the chief's hook
  // thread before every step; an error keeps the last count.
  std::function<absl::StatusOr<int>()> live_replicas;
  // With live_replicas: the fewest gradients a step aggregates (at least 1);
  // with fewer workers in the job, steps wait for more to join.
  int min_replicas = 1;
};

// What the chief's hook has seen; readable from any thread.
struct DISTFLOW_EXPORT SyncReplicasStats {
  std::atomic<int64_t> steps_applied{0};
  // Gradients dropped because they were computed at an older step (or came
  // twice from one replica), summed over the variables' accumulators and
  // divided by the number of variables: about one per late worker per step.
  std::atomic<int64_t> stale_gradients_dropped{0};
  // Gradients averaged into the last step applied (replicas_to_aggregate,
  // or with live_replicas the count that followed the membership), and how
  // many times that count changed.
  std::atomic<int64_t> replicas_aggregated{0};
  std::atomic<int64_t> aggregation_changes{0};
};

class DISTFLOW_EXPORT SyncReplicasOptimizer {
 public:
  // InvalidArgument if replicas_to_aggregate < 1, total_num_replicas <
  // replicas_to_aggregate, or replica_id is out of range (below 0, or,
  // without live_replicas, not below total_num_replicas).
  static absl::StatusOr<std::unique_ptr<SyncReplicasOptimizer>> Create(std::unique_ptr<Optimizer> optimizer,
                                                                       SyncReplicasOptions options);
  ~SyncReplicasOptimizer();

  absl::StatusOr<Optimizer::GradsAndVars> ComputeGradients(const Scope& scope, const Output& loss,
                                                           const std::vector<Output>& var_list = {}) {
    return optimizer_->ComputeGradients(scope, loss, var_list);
  }
  // The worker's train op (accumulate, then wait for the step); builds the
  // chief's update too. `global_step` is required. Call once per graph.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope, const Optimizer::GradsAndVars& grads_and_vars,
                                           const Output* global_step);
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss, const Output* global_step,
                                     const std::vector<Output>& var_list = {});

  // The hook every worker passes to its MonitoredSession; the chief's
  // initialises the accumulators and runs the update thread. Call after
  // ApplyGradients. The optimizer must outlive the hook.
  std::unique_ptr<SessionRunHook> MakeSessionRunHook(bool is_chief);

  const SyncReplicasOptions& options() const { return options_; }
  Optimizer* wrapped() const { return optimizer_.get(); }
  const SyncReplicasStats& stats() const { return stats_; }

 private:
  friend class SyncReplicasChiefHook;
  SyncReplicasOptimizer(std::unique_ptr<Optimizer> optimizer, SyncReplicasOptions options)
      : optimizer_(std::move(optimizer)), options_(options) {}

  std::unique_ptr<Optimizer> optimizer_;
  const SyncReplicasOptions options_;
  SyncReplicasStats stats_;
  bool built_ = false;
  // The chief's graph.
  std::vector<Output> ready_;       // AccumulatorWaitReady, one per variable
  Output barrier_step_, reported_;  // SyncBarrierStatus
  std::vector<Output> dropped_;     // AccumulatorTakeGradient's counts
  Output applied_step_;             // the global step after an update
  Operation update_;                // takes, applies, advances, releases
  Operation init_;                  // accumulators and barrier to the global step
  Output num_required_;             // elastic: fed by the chief's hook each step
};

}  // namespace distflow
