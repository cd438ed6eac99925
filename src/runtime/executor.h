// Executor: runs the part of a graph that a (feeds, fetches, targets)
// signature needs, on one device.
//
// Built once per signature (the session caches it): it prunes the graph to
// the nodes the fetches and targets depend on, stopping at fed tensors, and
// precomputes each node's consumers. Run executes one step in dependency
// order. Cheap kernels run inline on the thread that made them ready; of
// several expensive ones, one stays on this thread and the rest go to the
// inter-op pool, so a small step never hops threads. RunAsync runs a step
// without parking a thread (the distributed worker starts partitions on the
// RPC thread that received them). A failed node cancels the step; the error
// names the node and its op. A deadline cancels the step with
// DeadlineExceeded.
//
// An Executor is immutable after Create; Run may be called from many threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "base/thread_pool.h"
#include "distflow/step_stats.h"
#include "graph/graph.h"
#include "kernels/device.h"
#include "kernels/op_kernel.h"

namespace distflow {

class Timer;

// Kernels shared by every executor of one session, so stateful kernels (random
// generators) keep their state across signatures. Thread-safe.
class KernelCache {
 public:
  absl::StatusOr<std::shared_ptr<OpKernel>> Get(const Node& node, Device* device);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<OpKernel>> kernels_ ABSL_GUARDED_BY(mu_);
};

struct ExecutorOptions {
  Device* device = nullptr;
  ThreadPool* inter_op_pool = nullptr;  // null: everything on the calling thread
  ThreadPool* intra_op_pool = nullptr;
  std::string default_container;
  Rendezvous* rendezvous = nullptr;
  int64_t max_step_bytes = 0;  // most a step's kernels may allocate for outputs; 0: no limit
  Timer* timer = nullptr;      // runs step deadlines; null: Timer::Global() (tests pass a fake-clock one)
};

struct StepOptions {
  int64_t step_id = 0;
  int64_t timeout_ms = 0;                       // 0: no deadline
  CancellationManager* cancellation = nullptr;  // optional; one is made per step otherwise
  Rendezvous* rendezvous = nullptr;             // overrides ExecutorOptions::rendezvous
  StepStatsCollector* stats = nullptr;          // non-null: record each node's start and end here
  // Optional: called once, with the fetches, as soon as every node whose
  // result leaves the step has finished (each _Send, each _Recv, each
  // fetched node) and no node has failed, while the step's other nodes
  // (those that feed nothing outside it: a ps's variable updates) may still
  // run; the step's `done` still comes when everything has ended. Never
  // called for a graph with control flow, one with no such node, or a step
  // that failed first (then `done` alone reports).
  std::function<void(std::vector<Tensor>)> outputs_done;
};

class Executor {
 public:
  // `graph` must outlive the executor. Feeds and fetches must name existing
  // outputs; targets existing nodes (checked here, with suggestions).
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Graph& graph, const ExecutorOptions& options,
                                                          KernelCache* kernels, const std::vector<TensorId>& feeds,
                                                          const std::vector<TensorId>& fetches,
                                                          const std::vector<std::string>& targets);
  ~Executor();

  using DoneCallback = std::function<void(absl::StatusOr<std::vector<Tensor>>)>;

  // Runs one step. `feed_values` matches the feeds given to Create, in order;
  // returns the fetched tensors in order. The calling thread runs nodes
  // itself and then waits.
  absl::StatusOr<std::vector<Tensor>> Run(const StepOptions& options, const std::vector<Tensor>& feed_values) const;

  // Runs one step without parking any thread: `done` is called exactly once,
  // on whichever thread finishes the last node (possibly inside this call).
  // The calling thread runs only cheap nodes (and expensive ones whose
  // OpKernel::EstimatedWork is a few tens of microseconds); the rest go to
  // the inter-op pool, so an RPC thread may call this. The executor must stay alive until `done` is called.
  void RunAsync(const StepOptions& options, std::vector<Tensor> feed_values, DoneCallback done) const;

  int num_nodes() const;

 private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  void Start(const StepOptions& options, std::vector<Tensor> feed_values, bool owned, DoneCallback done) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distflow
