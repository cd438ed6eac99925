// LocalSession: runs a graph in this process (the in-process counterpart of a
// session whose target is grpc://...).
//
// Create/Extend give it a graph; Run(feeds, fetches, targets) runs one step.
// Executors are built once per (feeds, fetches, targets) signature and cached.
// Variables live in the resource manager of the process-wide local CPU device
// and outlive the session when they name a container; variables in the
// default container ("") belong to this session and are dropped by Close.
//
// Thread-safe: Run may be called from several threads at once, also while
// another thread extends the graph.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/thread_pool.h"
#include "distflow/session_options.h"
#include "graph/graph.h"
#include "kernels/device.h"
#include "runtime/executor.h"

namespace distflow {

// What every session offers, in process or over gRPC.
class SessionInterface {
 public:
  virtual ~SessionInterface() = default;
  // Adds nodes to the session's graph (the first call creates it).
  virtual absl::Status Extend(const proto::GraphDef& graph) = 0;
  virtual absl::StatusOr<std::vector<Tensor>> Run(const RunOptions& options,
                                                  const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                  const std::vector<std::string>& fetches,
                                                  const std::vector<std::string>& targets) = 0;
  virtual absl::Status Close() = 0;
  // Clears the named resource containers (all of them if `containers` is
  // empty) wherever the session's variables live: this process's device, or
  // every task of a cluster.
  virtual absl::Status Reset(const std::vector<std::string>& containers) = 0;
};

// What the distributed runtime gives a run that is one partition of a
// cluster step (Worker::RunGraphAsync); a program's own runs leave it empty.
struct PartitionStep {
  int64_t step_id = 0;                          // 0: the session numbers its own steps
  Rendezvous* rendezvous = nullptr;             // null: the executor's own
  CancellationManager* cancellation = nullptr;  // null: one of the step's own
  // Optional: StepOptions::outputs_done (the partition's outputs are out
  // while its variable updates still run).
  std::function<void(std::vector<Tensor>)> outputs_done;
};

class LocalSession : public SessionInterface {
 public:
  // Step deadlines run on `timer` (null: Timer::Global()), which must
  // outlive the session; a test passes one on a fake clock. Kernels run on
  // `device` (a cluster task's own; null: the process-wide LocalCpuDevice()),
  // which must outlive the session too.
  explicit LocalSession(SessionOptions options = {}, Timer* timer = nullptr, Device* device = nullptr);
  ~LocalSession();
  LocalSession(const LocalSession&) = delete;
  LocalSession& operator=(const LocalSession&) = delete;

  // Create requires an empty session; Extend adds nodes (existing ones must match).
  absl::Status Create(const proto::GraphDef& graph);
  absl::Status Extend(const proto::GraphDef& graph) override;

  // Fetches and feeds are tensor names ("node:0" or "node"); targets are node names.
  absl::StatusOr<std::vector<Tensor>> Run(const RunOptions& options,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets) override;
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets = {}) {
    return Run(RunOptions(), feeds, fetches, targets);
  }

  // Like Run, but never parks the calling thread: `done` gets the result on
  // whichever thread finishes the step (see Executor::RunAsync).
  void RunAsync(const RunOptions& options, const std::vector<std::pair<std::string, Tensor>>& feeds,
                const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                Executor::DoneCallback done, const PartitionStep& partition = {});

  // Drops the session's private variables; later calls fail.
  absl::Status Close() override;

  Device* device() const { return device_; }
  // Clears containers on this session's device.
  absl::Status Reset(const std::vector<std::string>& containers) override;
  int64_t num_cached_executors() const;

 private:
  struct PreparedStep {
    std::shared_ptr<Executor> executor;
    StepOptions step;
    std::vector<Tensor> feed_values;
  };
  absl::StatusOr<PreparedStep> Prepare(const RunOptions& options, const PartitionStep& partition,
                                       const std::vector<std::pair<std::string, Tensor>>& feeds,
                                       const std::vector<std::string>& fetches,
                                       const std::vector<std::string>& targets);
  absl::StatusOr<std::shared_ptr<Executor>> GetExecutor(const std::vector<TensorId>& feeds,
                                                        const std::vector<TensorId>& fetches,
                                                        const std::vector<std::string>& targets);

  const SessionOptions options_;
  Timer* const timer_;
  Device* device_;
  std::string default_container_;
  bool private_container_ = false;
  std::unique_ptr<ThreadPool> inter_op_;
  std::unique_ptr<ThreadPool> intra_op_;
  KernelCache kernels_;

  mutable absl::Mutex mu_;
  std::unique_ptr<Graph> graph_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Executor>> executors_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_step_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// The process-wide local CPU device (/job:localhost/replica:0/task:0/device:CPU:0).
Device* LocalCpuDevice();

// Clears the named containers on `device` (all of them if `containers` is empty).
void ResetContainers(Device* device, const std::vector<std::string>& containers);

}  // namespace distflow
