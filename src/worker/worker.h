// Worker: the part of every task that runs graph partitions.
//
// It owns the task's CPU device (whose resource manager keeps the variables
// of every session: between-graph replicas share them), the registered
// partitions (each a LocalSession over that device, so executors are cached
// per signature) and the rendezvous for cross-task tensors. A master reaches
// it in memory (local_worker.h) or through the gRPC service in front of it
// (grpc_worker_service.h). RunGraph starts on the thread that calls it and
// never parks it: cheap nodes run there, expensive ones on the partition's
// pool. A random incarnation number, fixed at start, lets masters notice a
// restarted task. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/thread_pool.h"
#include "distflow/server.h"
#include "kernels/device.h"
#include "proto/worker.pb.h"
#include "rpc/worker_interface.h"
#include "runtime/local_session.h"
#include "worker/deferred_updates.h"
#include "worker/read_prefetcher.h"
#include "worker/worker_rendezvous.h"

namespace distflow {

class BulkServer;
class CollectiveExecutor;
class CollectiveExecutorImpl;
class WorkerCacheInterface;

class Worker {
 public:
  Worker(std::string task_name, WorkerCacheInterface* peers, WorkerOptions options = {});
  ~Worker();

  const std::string& task_name() const { return task_name_; }
  uint64_t incarnation() const { return incarnation_; }
  Device* device() { return device_.get(); }
  std::string device_name() const { return device_->name(); }

  void GetStatus(proto::GetStatusResponse* resp) const;
  absl::Status RegisterGraph(const proto::RegisterGraphRequest& req, proto::RegisterGraphResponse* resp);
  // Waits (bounded) for the deferred updates in flight of the graph's
  // session first (deferred_updates.h).
  absl::Status DeregisterGraph(const std::string& handle);
  // Starts the partition on the calling thread (cheap nodes only; see
  // Executor::RunAsync) and calls `done` on whichever thread finishes it.
  // `call` must stay alive until then.
  // A partition registered with defer_updates answers once its outputs are
  // out, before its variable updates have run (deferred_updates.h); then
  // `call` is not touched after `done`. Runs of a session that do not defer
  // start after the session's deferred updates in flight, and partitions
  // that save or restore a checkpoint after every session's.
  void RunGraphAsync(RunGraphCall* call, std::function<void(absl::Status)> done);
  // Waits up to `timeout` for the deferred updates in flight (a clean
  // shutdown lets them finish); false if some did not end.
  bool WaitForDeferredUpdates(absl::Duration timeout) { return deferred_.WaitForUpdates("", timeout); }
  const DeferredUpdates& deferred_updates() const { return deferred_; }
  void CleanupGraph(const proto::CleanupGraphRequest& req);
  WorkerRendezvous* rendezvous() { return &rendezvous_; }
  // Aborts every running partition and fails every receive waiting here,
  // now and later, so that no RPC handler is left waiting (Server::Stop
  // calls it before shutting gRPC down, which waits for every handler).
  void AbortAll(const absl::Status& reason);
  // Aborts the partitions of steps run for the master on `task` (it died:
  // nothing will come to finish them), with `reason`.
  void AbortStepsOfMaster(const std::string& task, const absl::Status& reason);
  // Logs each partition that has run for longer than `every` (at most once
  // per `every`) with the receives it still waits for.
  void LogStalledSteps(absl::Duration every);
  // How many such reports were logged so far (tests wait for one).
  int64_t stalled_step_reports() const;
  // The device's collective executor (null without peers): the server
  // gives it the coordinator's group rendezvous.
  CollectiveExecutorImpl* collective() { return collective_.get(); }
  // Partitions running now.
  int running_partitions() const;
  // Partitions registered (by every master's sessions) and not deregistered.
  size_t registered_graphs() const;
  // Serves large tensors to peers that accept bulk transfer (null: never).
  // Set before the service starts.
  void set_bulk_server(BulkServer* bulk) { bulk_ = bulk; }
  // Calls without this token are refused (rpc/auth.h); "" checks
  // nothing. Set before the service starts.
  void set_auth_token(std::string token) { auth_token_ = std::move(token); }
  BulkServer* bulk_server() const { return bulk_; }
  const std::string& auth_token() const { return auth_token_; }
  // The task's connections to its peers (and their bulk ports).
  WorkerCacheInterface* peers() const { return peers_; }
  // Decodes large RunGraph feeds off the RPC threads.
  ThreadPool* compute_pool() const { return compute_.get(); }
  // Called when a Shutdown request arrives (the server decides what to do):
  // OK, or the failure that ended the cluster.
  void SetShutdownHandler(std::function<void(const absl::Status&)> fn);
  void HandleShutdown(const absl::Status& why);
  // Answers Heartbeat requests (coordination/coordination.h) on the
  // coordinator; elsewhere they are refused naming the coordinator. Set
  // before the service starts.
  using HeartbeatHandler = std::function<absl::Status(const proto::HeartbeatRequest&, proto::HeartbeatResponse*)>;
  void set_heartbeat_handler(HeartbeatHandler fn, std::string coordinator) {
    heartbeat_handler_ = std::move(fn);
    coordinator_ = std::move(coordinator);
  }
  // Answers a Heartbeat with the handler above; without one, FailedPrecondition
  // naming the coordinator.
  absl::Status Heartbeat(const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp);

 private:
  // The rendezvous's receive from another task: prefetched (read_prefetcher.h)
  // if the step's partition marked `key`, else a RecvTensor call.
  void RemoteRecv(const std::string& task, int64_t step_id, const std::string& key, CancellationManager* cm,
                  Rendezvous::DoneCallback done);
  // The rendezvous's receive of a tensor `task` pushes here: prefetched if
  // the step's partition marked `key` (the run's own value still arrives
  // with `task`'s fetch), else a wait for the push.
  void PushedRecv(const std::string& task, int64_t step_id, const std::string& key, CancellationManager* cm,
                  Rendezvous::DoneCallback done);
  // The prefetcher of the running step `step_id` if it covers `key` (and
  // `cm` is the step's), with the step's cancellation and run number.
  struct Prefetched {
    std::shared_ptr<ReadPrefetcher> prefetcher;  // null: not prefetched
    std::shared_ptr<CancellationManager> step_cm;
    int64_t run = 0;
  };
  Prefetched FindPrefetcher(int64_t step_id, const std::string& key, CancellationManager* cm);
  // Answers a prefetched receive of `key` (read_prefetcher.h); `fetch`
  // makes the run's own receive, under the step's cancellation, which may
  // outlive the run (tracked in inflight_).
  void PrefetchedRecv(const Prefetched& p, const std::string& key, Rendezvous::DoneCallback done,
                      std::function<void(CancellationManager*, Rendezvous::DoneCallback)> fetch);

  const std::string task_name_;
  const uint64_t incarnation_;
  std::string auth_token_;
  WorkerOptions options_;
  const int64_t max_step_bytes_;  // resolved: 0 is no limit
  WorkerCacheInterface* const peers_;
  std::unique_ptr<ThreadPool> compute_;  // decodes large RunGraph feeds off gRPC's threads
  std::unique_ptr<Device> device_;
  WorkerRendezvous rendezvous_;
  // Runs the device's collective ops over the rendezvous and the peers'
  // WorkerInterfaces (worker_collective_transport.h); registered for the
  // device (kernels/collective.h) while the worker lives.
  std::shared_ptr<CollectiveExecutorImpl> collective_;
  BulkServer* bulk_ = nullptr;

  // Partitions still running; the destructor cancels them and waits. Shared
  // so that a finishing step's last touch is not of the Worker itself.
  struct InFlight {
    absl::Mutex mu;
    int count ABSL_GUARDED_BY(mu) = 0;
    // Prefetched receives that may outlive their step (read_prefetcher.h),
    // by id, with their step's cancellation: cancelled and waited for too.
    std::map<uint64_t, std::shared_ptr<CancellationManager>> fetches ABSL_GUARDED_BY(mu);
    uint64_t next_fetch ABSL_GUARDED_BY(mu) = 0;
  };
  // Cancels the prefetched receives in flight with `reason`.
  void CancelFetches(const absl::Status& reason);
  std::shared_ptr<InFlight> inflight_ = std::make_shared<InFlight>();

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<LocalSession>> graphs_ ABSL_GUARDED_BY(mu_);
  struct GraphInfo {
    std::string session;      // the master session's handle
    bool defer = false;       // RegisterGraphRequest::defer_updates
    bool checkpoint = false;  // saves or restores variables: waits for every session's deferred updates
  };
  std::map<std::string, GraphInfo> graph_info_ ABSL_GUARDED_BY(mu_);
  // Partition runs answered before their variable updates ended.
  DeferredUpdates deferred_{task_name_};
  // The registered partitions with prefetched reads.
  std::map<std::string, std::shared_ptr<ReadPrefetcher>> prefetchers_ ABSL_GUARDED_BY(mu_);
  int64_t runs_ ABSL_GUARDED_BY(mu_) = 0;  // partition runs started, every partition's
  struct RunningStep {
    std::shared_ptr<CancellationManager> cm;
    std::shared_ptr<ReadPrefetcher> prefetcher;  // null: none
    int64_t run = 0;                             // its number among runs_
    std::string master_task;
    std::shared_ptr<DeferredUpdates::Run> deferred;  // null: answers at its end
    absl::Time started;
    absl::Time logged;  // last stalled-step log
  };
  std::map<int64_t, RunningStep> steps_ ABSL_GUARDED_BY(mu_);
  int64_t stalled_step_reports_ ABSL_GUARDED_BY(mu_) = 0;
  HeartbeatHandler heartbeat_handler_;
  std::string coordinator_;
  int64_t next_graph_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(const absl::Status&)> shutdown_handler_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
