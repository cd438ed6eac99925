// All-reduce bandwidth between worker processes: one process per rank, each
// a distflow server running CollectiveReduce (Add) of a float32 tensor in a
// grpc:// session on its own task, as all-reduce training does. Rank 0 prints
// one JSON line per size with the time per all-reduce, algbw (bytes / time)
// and busbw (2(n-1)/n * algbw, as nccl-tests define it).
// bench/run_collective_bench.sh starts the ranks and PyTorch's gloo beside.
//
//   collective_bench --cluster_spec='worker|127.0.0.1:P0;127.0.0.1:P1' --task_index=0 --sizes_mib=4,64
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "distflow/distflow.h"

ABSL_FLAG(std::string, cluster_spec, "", "the workers, e.g. worker|127.0.0.1:5000;127.0.0.1:5001");
ABSL_FLAG(int, task_index, 0, "this rank");
ABSL_FLAG(std::string, sizes_mib, "4,64", "tensor sizes in MiB");
ABSL_FLAG(int, iters, 10, "timed all-reduces per size");
ABSL_FLAG(int, warmup, 2, "untimed all-reduces per size first");

namespace df = distflow;

namespace {

df::Output Reduce(const df::Scope& s, const df::Output& x, int n, int64_t instance) {
  return df::Output(
      df::ops::Raw(
          s, "CollectiveReduce", {x},
          {{"group_size", n}, {"group_key", 1}, {"instance_key", instance}, {"merge_op", "Add"}, {"final_op", "Id"}}),
      0, s);
}

int Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "collective_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<df::ClusterSpec> cluster = df::ClusterSpec::Parse(absl::GetFlag(FLAGS_cluster_spec));
  if (!cluster.ok()) return Die("--cluster_spec", cluster.status());
  const int task = absl::GetFlag(FLAGS_task_index), n = cluster->num_tasks("worker");
  std::vector<int64_t> sizes;
  for (absl::string_view v : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mib), ',')) {
    int64_t mib = 0;
    if (!absl::SimpleAtoi(v, &mib) || mib <= 0) return Die("--sizes_mib", absl::InvalidArgumentError(std::string(v)));
    sizes.push_back(mib);
  }
  auto server = df::Server::Create(*cluster, "worker", task);
  if (!server.ok()) return Die("creating the server", server.status());
  if (absl::Status st = (*server)->Start(); !st.ok()) return Die("starting the server", st);

  df::Scope root = df::Scope::NewRootScope();
  df::Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
  df::Output one = df::ops::Const(s, 1.0f);
  df::Output barrier1 = Reduce(s, one, n, 1000), barrier2 = Reduce(s, one, n, 1001), barrier3 = Reduce(s, one, n, 1002);
  std::vector<df::Output> feeds, reduced;
  for (size_t i = 0; i < sizes.size(); ++i) {
    feeds.push_back(df::ops::Placeholder(s, df::DT_FLOAT, {sizes[i] * 1024 * 256}));
    reduced.push_back(Reduce(s, feeds.back(), n, static_cast<int64_t>(i) + 1));
  }
  if (!root.ok()) return Die("building the graph", root.status());
  df::SessionOptions o;
  o.device_filters = {"/job:worker"};  // wait until every rank is up
  o.wait_for_cluster_ms = 60000;
  df::Session sess((*server)->target(), o);
  for (size_t i = 0; i < sizes.size(); ++i) {
    df::Tensor x(df::DT_FLOAT, df::TensorShape({sizes[i] * 1024 * 256}));
    std::fill(x.flat<float>().begin(), x.flat<float>().end(), 1.0f);
    for (int w = 0; w < absl::GetFlag(FLAGS_warmup); ++w) {
      if (auto r = sess.Run({{feeds[i], x}}, {reduced[i]}); !r.ok()) return Die("warm-up", r.status());
    }
    if (auto r = sess.Run({barrier1}); !r.ok()) return Die("barrier", r.status());
    const int iters = absl::GetFlag(FLAGS_iters);
    const absl::Time start = absl::Now();
    for (int it = 0; it < iters; ++it) {
      auto r = sess.Run({{feeds[i], x}}, {reduced[i]});
      if (!r.ok()) return Die("all-reduce", r.status());
      if ((*r)[0].flat<float>()[0] != static_cast<float>(n)) {
        return Die("all-reduce", absl::InternalError(absl::StrCat("got ", (*r)[0].flat<float>()[0], " not ", n)));
      }
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - start) / iters;
    const double bytes = static_cast<double>(sizes[i]) * 1024 * 1024;
    if (task == 0) {
      std::printf(
          "{\"impl\": \"distflow\", \"ranks\": %d, \"mib\": %lld, \"ms\": %.2f, \"algbw_gbs\": %.3f, "
          "\"busbw_gbs\": %.3f}\n",
          n, static_cast<long long>(sizes[i]), secs * 1e3, bytes / secs / 1e9, bytes / secs / 1e9 * 2.0 * (n - 1) / n);
      std::fflush(stdout);
    }
  }
  // No rank may leave while another still reads its part of a collective:
  // after the second barrier every rank has finished the first, and rank 0
  // ends the cluster.
  if (auto r = sess.Run({barrier2}); !r.ok()) return Die("barrier", r.status());
  if (task != 0) {
    (void)sess.Run({barrier3});
    (*server)->Join();
    return 0;
  }
  if (auto r = sess.Run({barrier3}); !r.ok()) return Die("barrier", r.status());
  (void)df::ShutdownCluster(*cluster, "benchmark over");
  return 0;
}
