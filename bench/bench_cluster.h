// The cluster the distributed benchmarks run against (1 ps + 1 worker in
// this process, or external servers named by DISTFLOW_BENCH_WORKER) and small
// helpers shared by distributed_bench.cc (step latency) and transfer_bench.cc
// (tensor transfer, client feeds and fetches). Only 127.0.0.1 is used.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "distflow/distflow.h"

namespace distflow {
namespace bench {

inline constexpr int64_t kMiB = 1 << 20;

// PEM contents of a CA and a certificate it signed for localhost and
// 127.0.0.1 (server and client use), made with the openssl tool on first
// use (bulk_tls_bench.cc).
struct Pem {
  std::string cert, key, ca;
};
const Pem& Certificates();

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "distributed_bench: %s\n", what.c_str());
  std::abort();
}

// ---------------------------------------------------------------------------
// The cluster: 1 ps + 1 worker in this process, started once.

struct Cluster {
  std::vector<std::unique_ptr<Server>> servers;
  std::string worker_target;   // grpc://127.0.0.1:PORT
  std::string worker_address;  // 127.0.0.1:PORT
};

inline Cluster& GetCluster() {
  static Cluster* cluster = [] {
    // DISTFLOW_BENCH_WORKER=127.0.0.1:PORT: use a cluster of separate
    // distflow-server processes (1 ps + 1 worker, started by the script)
    // instead of servers inside this process.
    if (const char* w = std::getenv("DISTFLOW_BENCH_WORKER"); w != nullptr && *w != '\0') {
      auto* c = new Cluster;
      c->worker_address = w;
      c->worker_target = std::string("grpc://") + w;
      return c;
    }
    auto spec = MakeLocalClusterSpec(1, 1);
    if (!spec.ok()) Die(spec.status().ToString());
    auto servers = StartLocalCluster(*spec);
    if (!servers.ok()) Die(servers.status().ToString());
    auto* c = new Cluster;
    c->servers = std::move(*servers);
    for (auto& s : c->servers)
      if (s->task_name() == "/job:worker/replica:0/task:0") c->worker_target = s->target();
    if (c->worker_target.empty()) Die("no worker task in the local cluster");
    c->worker_address = c->worker_target.substr(std::string("grpc://").size());
    return c;
  }();
  return *cluster;
}

// The client as if in another process: its steps reach the master over gRPC.
inline SessionOptions Options() {
  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = false;
  return o;
}

inline void CheckRun(const absl::StatusOr<std::vector<Tensor>>& out, benchmark::State& state) {
  if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
}

// Voluntary + involuntary context switches of the whole process so far: the
// per-step difference counts thread hand-offs (a blocked thread woken by another).
inline int64_t ContextSwitches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

// Runs `step` per iteration and reports context switches per step.
template <typename Fn>
void TimeSteps(benchmark::State& state, Fn step) {
  int64_t csw0 = ContextSwitches();
  for (auto _ : state) step();
  state.counters["csw_per_step"] = benchmark::Counter(static_cast<double>(ContextSwitches() - csw0) /
                                                      static_cast<double>(std::max<int64_t>(1, state.iterations())));
}

// The median of `x` (0 if empty).
inline double Median(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
  return x[x.size() / 2];
}

}  // namespace bench
}  // namespace distflow
