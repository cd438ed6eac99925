// WorkerInterface: how a master reaches one task's worker, whatever carries
// the calls. The master step registers, runs and cleans up partitions through
// it and never sees a transport: `LocalWorker` (local_worker.h) calls this
// process's Worker in memory, `GrpcRemoteWorker` (grpc_remote_worker.h) makes
// the RPCs, and only the latter knows about gRPC contexts, deadlines, status
// conversion and whether a tensor travels inside a message or over a bulk
// port. `WorkerCache::GetWorker` picks the implementation for a task.
//
// Every call is asynchronous: `done` runs once, on whichever thread finishes
// the call (possibly the caller's, before the call returns). The blocking
// forms are for pool threads, never for RPC threads. Implementations are
// thread-safe; a CallOptions is shared by one call and whoever cancels it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "distflow/step_stats.h"
#include "distflow/tensor.h"
#include "kernels/rendezvous.h"
#include "proto/worker.pb.h"

namespace distflow {

class CancellationManager;

// One partition run, in memory: what it is fed, what it fetches, and (on
// success) the fetched tensors. The transport turns it into messages if the
// worker is remote; a local worker reads and fills it directly.
struct RunGraphCall {
  std::string graph_handle;
  int64_t step_id = 0;
  int64_t timeout_ms = 0;
  std::string master_task;                           // whose step this is ("" or the worker's own task: a local master)
  std::vector<std::pair<std::string, Tensor>> send;  // fed tensors
  std::vector<std::string> recv_keys;                // fetched tensors
  std::vector<std::string> targets;
  std::vector<Tensor> recv;  // on success, parallel to recv_keys
  bool trace = false;        // record when each node ran, into `stats`
  StepStats stats;
};

// The cancellation hook of one call. The transport installs how to cancel the
// call it started (a gRPC call's TryCancel); StartCancel runs it, at once or,
// if it comes first, as soon as the transport installs it. A local call has
// nothing to cancel (its partition is aborted by CleanupGraph). Thread-safe.
class CallOptions {
 public:
  // The call's deadline, from when the transport starts it (zero: the
  // transport's default for the call).
  void SetTimeout(absl::Duration timeout) { timeout_ = timeout; }
  absl::Duration timeout() const { return timeout_; }

  void StartCancel();
  // Installs `fn`; runs it at once if StartCancel came first.
  void SetCancelCallback(std::function<void()> fn);
  // The call has finished: nothing left to cancel.
  void ClearCancelCallback();

 private:
  absl::Duration timeout_ = absl::ZeroDuration();  // set before the call starts
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
};

class WorkerInterface {
 public:
  using StatusCallback = std::function<void(absl::Status)>;
  virtual ~WorkerInterface() = default;

  // The task's devices and incarnation. `opts` (may be null) bounds the call
  // (its timeout; without one the transport's short default).
  virtual void GetStatusAsync(CallOptions* opts, proto::GetStatusResponse* resp, StatusCallback done) = 0;
  // Registers a partition. `opts` (may be null) cancels the call and bounds
  // it (its timeout; without one the transport allows a long default, as
  // building a large partition may take long).
  virtual void RegisterGraphAsync(CallOptions* opts, const proto::RegisterGraphRequest* req,
                                  proto::RegisterGraphResponse* resp, StatusCallback done) = 0;
  virtual void DeregisterGraphAsync(const proto::DeregisterGraphRequest* req, StatusCallback done) = 0;
  // Runs a registered partition. `opts` (may be null) cancels the call;
  // `call` must outlive `done`. Whether the feeds and fetches travel inside
  // the messages or over a bulk port is the transport's business.
  virtual void RunGraphAsync(CallOptions* opts, RunGraphCall* call, StatusCallback done) = 0;
  // With an abort message: aborts the step's partition and fails its waiting
  // receives, so nothing on the worker is left waiting.
  virtual void CleanupGraphAsync(const proto::CleanupGraphRequest* req, StatusCallback done) = 0;
  // Clears the task's resource containers (Session::Reset); `opts` (may be
  // null) bounds the call.
  virtual void CleanupAllAsync(CallOptions* opts, const proto::CleanupAllRequest* req, StatusCallback done) = 0;
  // Asks the task to stop (ShutdownCluster): with `failed`, its training
  // loop is told the job failed for `reason`. `opts` (may be null) bounds it.
  virtual void ShutdownAsync(CallOptions* opts, const proto::ShutdownRequest* req, StatusCallback done) = 0;
  // Receives the tensor the worker's rendezvous holds under `key` for
  // `step_id`; `cm` (may be null) cancels the wait.
  virtual void RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                               Rendezvous::DoneCallback done) = 0;

  // Blocking forms (each bounded by the transport's deadline for the call).
  absl::Status GetStatus(proto::GetStatusResponse* resp);
  absl::Status RegisterGraph(const proto::RegisterGraphRequest& req, proto::RegisterGraphResponse* resp);
  absl::Status DeregisterGraph(const proto::DeregisterGraphRequest& req);
  absl::Status CleanupGraph(const proto::CleanupGraphRequest& req);
};

}  // namespace distflow
