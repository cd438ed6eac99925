// GrpcServer: what a Server (distflow/server.h) is inside: one task of a
// cluster, in this process. It serves the master and
// worker services (and gRPC's standard health service) on the task's address
// from the cluster spec, binding the host given there (0.0.0.0 only if the
// spec says so). Port 0 picks a free port; target() then reports the real
// one. Sessions in this process whose target is this server's call its
// master directly (local_master.h). Stop() closes sessions and shuts the
// server down (a second caller waits for the first); Join() returns once the
// server has stopped — after Stop(), a Shutdown request from the chief, or a
// signal handled by the binary. Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "bulk/bulk_transfer.h"
#include "collective/collective_executor_impl.h"
#include "coordination/coordination.h"
#include "distflow/cluster_spec.h"
#include "distflow/server.h"
#include "grpcpp/server.h"
#include "master/local_master.h"
#include "master/master.h"
#include "rpc/worker_cache.h"
#include "server/status_server.h"
#include "worker/worker.h"

namespace distflow {

class GrpcServer {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const ClusterSpec& cluster, const std::string& job,
                                                            int task_index, ServerOptions options = {});
  ~GrpcServer();

  absl::Status Start();
  void Stop();
  void Join();

  // "grpc://host:port" with the bound port.
  std::string target() const;
  const std::string& task_name() const { return task_name_; }
  // See Server::cluster.
  ClusterSpec cluster() const;
  // Tells a running server that task `task` of `job` now listens at
  // `address` (host:port).
  void SetPeerAddress(const std::string& job, int task, const std::string& address);
  Worker* worker() { return worker_.get(); }
  Master* master() { return master_.get(); }
  int port() const { return bound_port_; }
  // The bulk-transfer port, 0 if bulk transfer is off.
  int bulk_port() const { return bulk_ ? bulk_->port() : 0; }
  uint64_t bulk_bytes_served() const { return bulk_ ? bulk_->bytes_served() : 0; }
  uint64_t bulk_bytes_received() const { return bulk_ ? bulk_->bytes_received() : 0; }
  // Of those, the bytes that went through shared memory (same-host peers).
  uint64_t bulk_shm_bytes_served() const { return bulk_ ? bulk_->shm_bytes_served() : 0; }
  uint64_t bulk_shm_bytes_received() const { return bulk_ ? bulk_->shm_bytes_received() : 0; }
  // The name of the abstract Unix-domain socket that tasks on this host
  // reach this one on (rpc/unix_socket.h); "" if none.
  const std::string& unix_socket() const { return unix_socket_; }
  // The channels to the other tasks.
  WorkerCache* worker_cache() { return workers_.get(); }
  // The status page's port, 0 if it is off.
  int status_port() const;
  // See Server::DeadTasks and Server::exit_status.
  std::vector<std::string> DeadTasks() const;
  absl::Status exit_status() const;
  // The failure detector; null when it is off or before Start.
  CoordinationAgent* coordination() { return agent_.get(); }
  // The elastic collective group (distflow/elastic.h; elastic_group.cc):
  // rebuilt now, and the coordinator's word on what changed since.
  absl::StatusOr<GroupState> RebuildElasticGroup(absl::Duration timeout);
  absl::StatusOr<proto::GroupRendezvousResponse> QueryElasticGroup();

 private:
  GrpcServer(ClusterSpec cluster, std::string job, int task, ServerOptions options);
  std::string host_port() const;  // with the bound port
  // Resolves options_.worker.intra_op_threads == 0 to this task's share of the machine.
  void SizeComputeThreads();
  void StartCoordination() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One ask of the collective group rendezvous, to the coordinator.
  absl::StatusOr<GroupAnswer> AskGroupRendezvous(const GroupAsk& ask);
  absl::Status CallGroupRendezvous(const proto::GroupRendezvousRequest& req, proto::GroupRendezvousResponse* resp);
  // A task died: fail what waits on it.
  void OnTaskDead(const std::string& task, const absl::Status& why);
  // After each heartbeat: steps started since a task was declared dead
  // that need it fail; a ps whose job is gone gives up (orphan_grace_ms).
  void CheckOrphaned();
  // Stops from a thread of our own with `why` as the exit status (the first
  // reason wins); with `end_cluster`, first asks every other task to stop.
  void StopInBackground(const absl::Status& why, bool end_cluster);

  // Records that `job`'s task `task` listens at `address`.
  void SetAddressLocked(const std::string& job, int task, const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ClusterSpec cluster_ ABSL_GUARDED_BY(mu_);
  const std::string job_;
  const int task_;
  const std::string task_name_;
  ServerOptions options_;
  std::string host_;
  int bound_port_ = 0;
  std::string unix_socket_;           // set by Start
  std::unique_ptr<BulkServer> bulk_;  // outlives the services that offer tensors on it
  std::unique_ptr<WorkerCache> workers_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Master> master_;
  // gRPC's face of worker_ and master_; outlive server_, not them.
  std::unique_ptr<grpc::Service> worker_service_;
  std::unique_ptr<grpc::Service> master_service_;
  std::unique_ptr<grpc::Service> elastic_service_;  // on the coordinator task only
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<StatusServer> status_;               // stopped before the objects it shows
  std::unique_ptr<CoordinationService> coordination_;  // on the coordinator task only
  std::unique_ptr<CoordinationAgent> agent_;           // stopped first on Stop
  // Sessions in this process reach master_ through this (local_master.h).
  std::shared_ptr<LocalMasterEntry> local_entry_;
  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status exit_status_ ABSL_GUARDED_BY(mu_);
  std::thread shutdown_thread_ ABSL_GUARDED_BY(mu_);  // runs Stop() for a Shutdown request
  absl::Notification stopped_note_;
};

}  // namespace distflow
