// Server: one task of a cluster, in this process. It serves the master and
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
#include "distributed/cluster_spec.h"
#include "distributed/local_master.h"
#include "distributed/master.h"
#include "distributed/status_server.h"
#include "distributed/worker.h"
#include "grpcpp/server.h"

namespace distflow {

struct ServerOptions {
  WorkerOptions worker;
  // Large tensors between tasks travel over a second, system-chosen TCP port
  // on the task's host (distributed/bulk_transfer.h). Turn off where only the
  // cluster spec's ports are reachable; DISTFLOW_BULK_TRANSFER=0 does too.
  bool bulk_transfer = true;
  // The bulk port: 0 lets the system choose (a failure to listen then only
  // turns bulk transfer off); a fixed port for firewalled sites must be free.
  int bulk_port = 0;
  // An HTTP status page and Prometheus metrics on this port of the task's
  // host (distributed/status_server.h): -1 for none, 0 for a free port. A
  // port that cannot be had turns only the page off, with a warning; the
  // task still serves.
  int status_port = -1;
  // The cluster's secret (distributed/auth.h): every RPC and bulk connection
  // must carry it, and this task's calls to its peers do. Unset: the
  // process's token (DISTFLOW_AUTH_TOKEN or --auth_token_file); "": none.
  std::optional<std::string> auth_token;
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ClusterSpec& cluster, const std::string& job,
                                                        int task_index, ServerOptions options = {});
  ~Server();

  absl::Status Start();
  void Stop();
  void Join();

  // "grpc://host:port" with the bound port.
  std::string target() const;
  const std::string& task_name() const { return task_name_; }
  const ClusterSpec& cluster() const { return cluster_; }
  // Tells a running server that `task` now listens at `address` (host:port).
  void SetPeerAddress(const std::string& task, const std::string& address);
  Worker* worker() { return worker_.get(); }
  int port() const { return bound_port_; }
  // The bulk-transfer port, 0 if bulk transfer is off.
  int bulk_port() const { return bulk_ ? bulk_->port() : 0; }
  uint64_t bulk_bytes_served() const { return bulk_ ? bulk_->bytes_served() : 0; }
  uint64_t bulk_bytes_received() const { return bulk_ ? bulk_->bytes_received() : 0; }
  // The status page's port, 0 if it is off.
  int status_port() const;

 private:
  Server(ClusterSpec cluster, std::string job, int task, ServerOptions options);
  std::string host_port() const;  // with the bound port

  ClusterSpec cluster_;
  const std::string job_;
  const int task_;
  const std::string task_name_;
  ServerOptions options_;
  std::string host_;
  int bound_port_ = 0;
  std::unique_ptr<BulkServer> bulk_;  // outlives the services that offer tensors on it
  std::unique_ptr<WorkerCache> workers_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<StatusServer> status_;  // stopped before the objects it shows
  // Sessions in this process reach master_ through this (local_master.h).
  std::shared_ptr<LocalMasterEntry> local_entry_;
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread shutdown_thread_ ABSL_GUARDED_BY(mu_);  // runs Stop() for a Shutdown request
  absl::Notification stopped_note_;
};

// Starts every task of `cluster` in this process (for tests, the way gloo's
// tests run N ranks in one process). Addresses with port 0 are given free ports.
absl::StatusOr<std::vector<std::unique_ptr<Server>>> StartLocalCluster(const ClusterSpec& cluster,
                                                                      ServerOptions options = {});

// Asks every task of `cluster` (except those in `except`) to stop its server:
// how the chief ends a cluster when training is over, so that parameter
// servers exit instead of waiting to be killed. Tasks already gone are fine.
absl::Status ShutdownCluster(const ClusterSpec& cluster, const std::string& reason,
                             const std::vector<std::string>& except = {});

// A cluster spec of `num_ps` ps tasks and `num_workers` worker tasks on
// 127.0.0.1 with free ports.
absl::StatusOr<ClusterSpec> MakeLocalClusterSpec(int num_ps, int num_workers);

}  // namespace distflow
