// WorkerCacheInterface: every task of the cluster as a WorkerInterface, for
// the master, the worker and the collectives, which must not know how a task
// is reached. The gRPC implementation is WorkerCache (worker_cache.h: this
// process's own task in memory through a LocalWorker, every other one
// through a GrpcRemoteWorker); what it owns beyond this interface (channels,
// stubs, bulk reads, task addresses) is for rpc/ and server/ only. This
// header includes no gRPC, so a layer that holds the interface compiles
// without gRPC's headers. Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "distflow/cluster_spec.h"
#include "kernels/rendezvous.h"
#include "rpc/worker_interface.h"

namespace distflow {

class CancellationManager;
class Env;

class WorkerCacheInterface {
 public:
  virtual ~WorkerCacheInterface() = default;

  virtual const ClusterSpec& cluster() const = 0;
  // Every task name in the cluster, sorted.
  virtual std::vector<std::string> TaskNames() const = 0;
  // The clock the cache's waits read (never null), for its users' own
  // timekeeping (the master's stalled-step log).
  virtual Env* clock() const = 0;

  // `worker` (may be null: none; a LocalWorker, worker/local_worker.h) runs
  // `task`'s calls in memory from now on.
  virtual void SetLocalWorker(const std::string& task, std::shared_ptr<WorkerInterface> worker) = 0;
  // How to reach `task`: its in-process worker, or over the transport.
  virtual absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task_name) = 0;

  // Asks every task that passes `filters` for its devices, retrying tasks
  // that are not up yet with backoff (a log line every few seconds names
  // them) until `wait` runs out; then Unavailable names the missing tasks and
  // their addresses. Returns the device names, sorted. `stop` (may be null)
  // ends the wait early with Cancelled, e.g. when the server shuts down.
  virtual absl::StatusOr<std::vector<std::string>> WaitForDevices(const std::vector<std::string>& filters,
                                                                  absl::Duration wait,
                                                                  const absl::Notification* stop) = 0;

  // Pulls a tensor from `task` for the rendezvous.
  virtual void RecvTensorAsync(const std::string& task, int64_t step_id, const std::string& key,
                               CancellationManager* cm, Rendezvous::DoneCallback done) = 0;
  // Pulls a bundle, the tensors `task` sent under each of `keys` (the
  // partitioner's transfer bundles, placement/transfer_bundles.h), in one
  // call; `done` gets them in the order of `keys`. The call carries
  // `pushed` to `task`, whose rendezvous takes them as sent there (those
  // marked `fetch` it fetches from this task by their keys).
  using BundleCallback = std::function<void(absl::Status, std::vector<Tensor>)>;
  virtual void RecvTensorBundleAsync(const std::string& task, int64_t step_id, const std::vector<std::string>& keys,
                                     std::vector<PushedTensor> pushed, CancellationManager* cm,
                                     BundleCallback done) = 0;
};

}  // namespace distflow
