// WorkerCluster: the cluster of the collective cluster tests
// (collective_cluster_test, fusion_cycle_cluster_test,
// dead_rank_cluster_test): N worker servers (a test may add ps tasks) on
// free loopback ports inside the test process, each replica driven through
// its own grpc:// session limited to its own task (between-graph, as an
// all-reduce program runs), so every byte between ranks travels over the
// workers' transport. A test fixture inherits it beside ::testing::Test.
// Not thread-safe: the test's thread starts and stops servers; sessions
// run on any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"

namespace distflow {
namespace cluster_test {

class WorkerCluster {
 protected:
  // Starts `workers` worker servers and `ps` ps servers (a failure fails
  // the test).
  void Start(int workers, const ServerOptions& options = {}, int ps = 0) {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(ps, workers);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec, options);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
  }
  // Worker `task`'s server; null if it was stopped (or never started).
  Server* ServerOf(int task) {
    for (auto& s : servers_)
      if (s != nullptr && s->task_name() == TaskName("worker", task)) return s.get();
    return nullptr;
  }
  std::string Target(int task) { return ServerOf(task) != nullptr ? ServerOf(task)->target() : ""; }
  // Worker `task`'s session: its own task only, as each replica's is.
  std::unique_ptr<Session> SessionOf(int task) {
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    o.device_filters = {absl::StrCat("/job:worker/task:", task)};
    return std::make_unique<Session>(Target(task), o);
  }
  // Destroys worker `task`'s server, as a rank that dies: its peers' calls
  // to it fail from then on.
  void StopWorker(int task) {
    for (auto& s : servers_)
      if (s != nullptr && s->task_name() == TaskName("worker", task)) s.reset();
  }
  // Runs fn(task) for workers 0..n-1 at once, each on its own thread.
  static void OnEveryWorker(int n, const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
    for (auto& t : threads) t.join();
  }

  std::vector<std::unique_ptr<Server>> servers_;
};

}  // namespace cluster_test
}  // namespace distflow
