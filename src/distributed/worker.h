// Worker: the part of every task that runs graph partitions.
//
// It owns the task's CPU device (whose resource manager keeps the variables
// of every session: between-graph replicas share them), the registered
// partitions (each a LocalSession over that device, so executors are cached
// per signature), the rendezvous for cross-task tensors, and the gRPC worker
// service. RunGraph runs on the worker's own threads so gRPC's threads never
// block. A random incarnation number, fixed at start, lets masters notice a
// restarted task. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "base/thread_pool.h"
#include "distributed/worker_cache.h"
#include "distributed/worker_rendezvous.h"
#include "kernels/device.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/local_session.h"

namespace distflow {

struct WorkerOptions {
  int inter_op_threads = 0;
  int intra_op_threads = 0;
};

class Worker {
 public:
  Worker(std::string task_name, WorkerCache* peers, WorkerOptions options = {});
  ~Worker();

  const std::string& task_name() const { return task_name_; }
  uint64_t incarnation() const { return incarnation_; }
  Device* device() { return device_.get(); }
  std::string device_name() const { return device_->name(); }

  // The gRPC service; register it with a server builder.
  grpc::Service* service();

  void GetStatus(proto::GetStatusResponse* resp) const;
  absl::Status RegisterGraph(const proto::RegisterGraphRequest& req, proto::RegisterGraphResponse* resp);
  absl::Status DeregisterGraph(const std::string& handle);
  // Calls `done` on a worker thread when the partition has run.
  void RunGraphAsync(const proto::RunGraphRequest* req, proto::RunGraphResponse* resp,
                     std::function<void(absl::Status)> done);
  void CleanupGraph(const proto::CleanupGraphRequest& req);
  WorkerRendezvous* rendezvous() { return &rendezvous_; }
  // Called when a Shutdown request arrives (the server decides what to do).
  void SetShutdownHandler(std::function<void(const std::string&)> fn);
  void HandleShutdown(const std::string& reason);

 private:
  class Service;

  const std::string task_name_;
  const uint64_t incarnation_;
  WorkerOptions options_;
  std::unique_ptr<ThreadPool> compute_;  // runs RunGraph requests
  std::unique_ptr<Device> device_;
  WorkerRendezvous rendezvous_;
  std::unique_ptr<Service> service_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<LocalSession>> graphs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<CancellationManager>> steps_ ABSL_GUARDED_BY(mu_);
  int64_t next_graph_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(const std::string&)> shutdown_handler_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
