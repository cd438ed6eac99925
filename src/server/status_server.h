// StatusServer: a task's HTTP view of itself, on a second port
// (ServerOptions::status_port, distflow-server --status_port), served by
// cpp-httplib.
//
//   GET /metrics  Prometheus text format: the process-wide registry
//                 (base/metrics.h: RPCs by method, tensor bytes by peer, steps
//                 and their latency, dropped stale gradients) plus what this
//                 task holds now (sessions, variables and their bytes, bulk
//                 bytes, uptime).
//   GET /status   An HTML page: the task, its uptime, the cluster and whether
//                 each peer answers now, variables held, the last steps, and
//                 the scalar series the program reported (the chief's loss and
//                 accuracy) as inline SVG curves. No scripts, fonts or other
//                 requests: it renders offline.
//   GET /         Redirects to /status.
//
// The view's objects belong to the Server, which stops this before they go.
// Thread-safe; Stop is idempotent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/metrics.h"
#include "distflow/cluster_spec.h"

namespace httplib {
class Server;
}

namespace distflow {

class BulkServer;
class Master;
class Worker;
class WorkerCache;

struct StatusView {
  std::string task;  // "/job:ps/replica:0/task:0"
  std::string grpc_address;
  ClusterSpec cluster;
  absl::Time started;
  Master* master = nullptr;
  Worker* worker = nullptr;
  WorkerCache* peers = nullptr;
  BulkServer* bulk = nullptr;  // may be null
};

class StatusServer {
 public:
  // Listens on host:port (0: a free port); Unavailable naming the address if
  // it cannot.
  static absl::StatusOr<std::unique_ptr<StatusServer>> Start(StatusView view, const std::string& host, int port);
  ~StatusServer();
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  int port() const { return port_; }
  void Stop();

  // The pages, also for tests that do not go through HTTP.
  std::string MetricsText() const;
  std::string StatusHtml() const;

 private:
  explicit StatusServer(StatusView view);
  // On the worker cache's clock (view_.peers; the real one without it), as
  // the master's step times are.
  absl::Time Now() const;

  const StatusView view_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
  int64_t collector_ = 0;
};

// A polyline chart of (step, value) points as an inline SVG element; the
// element carries data-series and data-points (the number of points drawn).
// Exposed for tests.
std::string SvgChart(const std::string& series, const std::vector<ScalarPoint>& points);

}  // namespace distflow
