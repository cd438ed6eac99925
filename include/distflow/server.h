// Server: one task of a cluster, in this process (TensorFlow's
// tf.train.Server). It serves the master and worker services, and gRPC's
// standard health service, on the task's address from the cluster spec,
// binding the host given there (0.0.0.0 only if the spec says so). Port 0
// picks a free port; target() then reports the real one.
//
//   auto cluster = ClusterSpec::FromString("ps=127.0.0.1:2222;worker=127.0.0.1:2223");
//   auto server = Server::Create(*cluster, "ps", 0);
//   (*server)->Start();
//   (*server)->Join();  // until the chief shuts the cluster down
//
// Sessions in this process whose target is the server's call its master
// directly, without gRPC. Stop() closes sessions and shuts the server down (a
// second caller waits for the first); Join() returns once the server has
// stopped: after Stop(), a Shutdown request from the chief, or a signal that
// the program handles. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/cluster_spec.h"
#include "distflow/export.h"

namespace distflow {

class GrpcServer;  // internal (server/grpc_server.h)

// Partition threads (0: intra-op = CPUs usable / the cluster's tasks on this host, >= 1; inter-op = one per core).
struct DISTFLOW_EXPORT WorkerOptions {
  int inter_op_threads = 0;
  int intra_op_threads = 0;
  // The most memory one step's kernel outputs may hold at once on this task
  // (so one request cannot take the machine's memory): 0 means an eighth of
  // the machine's memory, -1 no limit. Over it, the step fails with
  // RESOURCE_EXHAUSTED naming the node and --max_step_bytes.
  int64_t max_step_bytes = 0;
  // Partitions this task runs at once; more are refused with
  // RESOURCE_EXHAUSTED naming --max_concurrent_steps.
  int max_concurrent_steps = 1024;
};

struct DISTFLOW_EXPORT ServerOptions {
  WorkerOptions worker;
  // Large tensors between tasks travel over a second, system-chosen TCP port
  // on the task's host. Turn off where only the cluster spec's ports are
  // reachable; DISTFLOW_BULK_TRANSFER=0 does too.
  bool bulk_transfer = true;
  // The bulk port: 0 lets the system choose (a failure to listen then only
  // turns bulk transfer off); a fixed port for firewalled sites must be free.
  int bulk_port = 0;
  // Tasks on one machine (same boot id and hostname) move those large
  // tensors through shared memory (memfd segments handed over a Unix-domain
  // socket, authenticated with the cluster token) instead of TCP. Off here
  // turns it off for this task's bulk port and its own fetches; so does
  // DISTFLOW_SHM=0. With TLS on it needs a cluster token (docs/TRANSPORT.md).
  bool shared_memory = true;
  // An HTTP status page (/status) and Prometheus metrics (/metrics) on this
  // port of the task's host: -1 for none, 0 for a free port. A port that
  // cannot be had turns only the page off, with a warning; the task still
  // serves.
  int status_port = -1;
  // The cluster's secret (distflow/auth.h): every RPC and bulk connection
  // must carry it, and this task's calls to its peers do. Unset: the
  // process's token (DISTFLOW_AUTH_TOKEN or --auth_token_file); "": none.
  std::optional<std::string> auth_token;
  // Failure detection (as TensorFlow 2's coordination service does): every
  // task sends a heartbeat each `heartbeat_interval_ms` to the cluster's
  // coordinator (ps 0, else the chief). A task heard from and then silent
  // for `heartbeat_timeout_ms` is declared dead; every task learns it, and
  // steps that wait on it fail with an UNAVAILABLE error naming it.
  // heartbeat_timeout_ms = 0 turns failure detection off.
  int heartbeat_interval_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  // A ps task whose job is gone gives up this long after the death was
  // noticed: the chief died and did not come back, every worker died or
  // left with at least one dead, or the coordinator stopped answering.
  // The server then stops (the coordinator first ends the cluster), Join()
  // returns and exit_status() says why. -1: never (other jobs never do).
  int orphan_grace_ms = 60000;
  // A step that has run this long logs, on the master and on every task
  // running one of its partitions, what it still waits for (the tasks whose
  // partitions have not returned, the receives not satisfied), again every
  // this long. 0: never. Needs failure detection on (its heartbeat drives it).
  int stall_log_ms = 30000;
  // Sessions this task's master holds at once; more are refused with
  // RESOURCE_EXHAUSTED naming --max_sessions (close sessions when done).
  int max_sessions = 1024;
};

// One task's server. Start, Stop and Join may be called from any thread (Stop
// from a signal-handling thread while another waits in Join); the accessors
// read what Start set, so call them once Start has returned.
class DISTFLOW_EXPORT Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ClusterSpec& cluster, const std::string& job,
                                                        int task_index, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the task's ports and serves. On a running server it does nothing
  // (OK); after Stop it is FailedPrecondition (create a new Server).
  absl::Status Start();
  void Stop();
  void Join();

  // "grpc://host:port" with the bound port.
  std::string target() const;
  // "/job:ps/replica:0/task:0".
  const std::string& task_name() const;
  // The cluster as this server knows it now: with the port it bound for a
  // port-0 address, and the addresses StartLocalCluster moved tasks to.
  ClusterSpec cluster() const;
  int port() const;
  // The bulk-transfer port, 0 if bulk transfer is off.
  int bulk_port() const;
  // The status page's port, 0 if it is off.
  int status_port() const;
  // Tasks of the cluster known to be dead (ServerOptions::heartbeat_*),
  // sorted, as "/job:worker/replica:0/task:1".
  std::vector<std::string> DeadTasks() const;
  // Why the server stopped: OK after Stop() or the chief's shutdown, the
  // failure otherwise (the job died; see ServerOptions::orphan_grace_ms).
  absl::Status exit_status() const;

  // For distflow's own tools and tests, which include the internal header.
  GrpcServer* impl() const { return impl_.get(); }

 private:
  explicit Server(std::unique_ptr<GrpcServer> impl);
  std::unique_ptr<GrpcServer> impl_;
};

// Starts every task of `cluster` in this process (for tests, the way gloo's
// tests run N ranks in one process). Addresses with port 0 are given free ports
// before any task starts, so that every task knows every other's; a task
// whose port was taken meanwhile moves to another, and the tasks already
// running are told.
DISTFLOW_EXPORT absl::StatusOr<std::vector<std::unique_ptr<Server>>> StartLocalCluster(const ClusterSpec& cluster,
                                                                                       ServerOptions options = {});

// Asks every task of `cluster` (except those in `except`, named
// "/job:worker/task:0" or "/job:worker/replica:0/task:0") to stop its server:
// how the chief ends a cluster when training is over, so that parameter
// servers exit instead of waiting to be killed. Tasks already gone are fine.
// Every task is asked even if one fails; the error then names each task that
// did not take the request. InvalidArgument, asking nothing, if `except`
// holds something that is not a task name. The calls carry `auth_token`
// (see ServerOptions::auth_token); unset, the process's token.
DISTFLOW_EXPORT absl::Status ShutdownCluster(const ClusterSpec& cluster, const std::string& reason,
                                             const std::vector<std::string>& except = {},
                                             const std::optional<std::string>& auth_token = std::nullopt);

// A cluster spec of `num_ps` ps tasks and `num_workers` worker tasks on
// 127.0.0.1 with free ports.
DISTFLOW_EXPORT absl::StatusOr<ClusterSpec> MakeLocalClusterSpec(int num_ps, int num_workers);

}  // namespace distflow
