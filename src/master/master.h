// Master: the session service of a task (on the network through
// grpc_master_service.h, in this process through local_master.h). A client
// creates a session with a graph, extends it, and runs steps; the master discovers the cluster's
// devices (waiting, with backoff and a log line naming what it waits for,
// for tasks that are not up yet), places and partitions the graph once per
// (feeds, fetches, targets) signature, registers the partitions with their
// workers, and runs each step on all of them. An error on any task aborts the
// step everywhere and reaches the client with the task's name. A RunStep
// retried with the same request id returns the first result instead of
// running twice. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/thread_pool.h"
#include "proto/master.pb.h"

namespace distflow {

class BulkServer;
class MasterSession;
class Worker;
class WorkerCacheInterface;

class Master {
 public:
  // `local_task`: this server's task, where unconstrained nodes go;
  // `local_worker` (may be null) runs that task's partitions without an RPC
  // (it is registered with `workers`: WorkerCache::SetLocalWorker).
  Master(std::string local_task, WorkerCacheInterface* workers, Worker* local_worker = nullptr);
  ~Master();

  absl::Status CreateSession(const proto::CreateSessionRequest& req, proto::CreateSessionResponse* resp);
  absl::Status ExtendSession(const proto::ExtendSessionRequest& req);
  // Runs a step without parking the calling thread; `done` is called once,
  // on whichever thread finishes it. `req` and `resp` must outlive that.
  void RunStepAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp,
                    std::function<void(absl::Status)> done);
  absl::Status CloseSession(const std::string& handle);
  absl::Status ListDevices(proto::ListDevicesResponse* resp);
  absl::Status Reset(const proto::ResetRequest& req);

  // Closes every session (on server shutdown).
  void CloseAll();
  // Fails every running step with a partition on `task` (declared dead by
  // the coordination service) with `why`.
  void AbortStepsOnTask(const std::string& task, const absl::Status& why);
  // See MasterSession::LogStalledSteps.
  void LogStalledSteps(absl::Duration every);
  // How many stalled-step reports were logged so far (tests wait for one).
  int64_t stalled_step_reports() const;

  // The last kRecentSteps steps this master ran, oldest first (for the status
  // page; their counts and latencies are in the metrics registry).
  struct StepRecord {
    absl::Time end;
    double seconds = 0;
    std::string status;  // "OK" or the error's code and message
  };
  static constexpr size_t kRecentSteps = 20;
  std::vector<StepRecord> RecentSteps() const;
  size_t num_sessions() const;
  // CreateSession calls still waiting for the cluster.
  int sessions_being_created() const;

  // Takes large feeds from and serves large fetches to clients (null: never).
  // Set before the service starts.
  void set_bulk_server(BulkServer* bulk) { bulk_ = bulk; }
  // Calls without this token are refused (rpc/auth.h); "" checks
  // nothing. Set before the service starts.
  void set_auth_token(std::string token) { auth_token_ = std::move(token); }
  // Sessions held at once, counting those still being created (waiting for
  // the cluster); CreateSession past it is RESOURCE_EXHAUSTED (0: no limit). Set before the service starts.
  void set_max_sessions(int n) { max_sessions_ = n; }
  BulkServer* bulk_server() const { return bulk_; }
  const std::string& auth_token() const { return auth_token_; }
  const std::string& local_task() const { return local_task_; }
  // Runs the blocking calls (CreateSession waits for the cluster).
  ThreadPool* pool() const { return pool_.get(); }

 private:
  absl::StatusOr<std::shared_ptr<MasterSession>> Find(const std::string& handle);
  void RecordStep(absl::Time start, const absl::Status& st);
  absl::Time Now() const;  // on the worker cache's clock

  const std::string local_task_;
  WorkerCacheInterface* const workers_;
  BulkServer* bulk_ = nullptr;
  int max_sessions_ = 0;
  std::string auth_token_;
  absl::Notification closing_;        // CloseAll: sessions still waiting for the cluster give up
  std::unique_ptr<ThreadPool> pool_;  // runs blocking calls off gRPC's threads
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<MasterSession>> sessions_ ABSL_GUARDED_BY(mu_);
  int64_t next_session_ ABSL_GUARDED_BY(mu_) = 0;
  // Sessions still waiting for the cluster in CreateSession: they count
  // against max_sessions_ from the start.
  int creating_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stalled_step_reports_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Mutex steps_mu_;
  std::deque<StepRecord> recent_ ABSL_GUARDED_BY(steps_mu_);
};

}  // namespace distflow
