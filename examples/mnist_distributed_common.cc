#include "mnist_distributed_common.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "distflow/elastic.h"
#include "distflow/status.h"
#include "distflow/train/layers.h"
#include "mnist_distributed_flags.h"

namespace df = distflow;

namespace mnist_distributed {

int Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

int Usage(const std::string& what) {
  std::fprintf(stderr, "mnist_distributed: %s\n", what.c_str());
  return 2;
}

df::Output Network(const df::Scope& s, const df::Output& images, const std::string& model) {
  if (model == "softmax") return df::layers::fully_connected(s, images, 10, df::layers::kNoActivation, "logits");
  auto x = df::ops::Reshape(s, images, {-1, 28, 28, 1});
  auto net = df::layers::conv2d(s, x, 32, {5, 5}, 1, "SAME", df::layers::kRelu, "conv1");
  net = df::layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool1");
  net = df::layers::conv2d(s, net, 64, {5, 5}, 1, "SAME", df::layers::kRelu, "conv2");
  net = df::layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool2");
  net = df::layers::flatten(s, net, "flatten");
  net = df::layers::fully_connected(s, net, 500, df::layers::kRelu, "fully_connected");
  return df::layers::fully_connected(s, net, 10, df::layers::kNoActivation, "pred");
}

df::ServerOptions BaseServerOptions() {
  df::ServerOptions o;
  o.worker.intra_op_threads = absl::GetFlag(FLAGS_intra_op_threads);
  o.status_port = absl::GetFlag(FLAGS_status_port);
  o.heartbeat_timeout_ms = static_cast<int>(absl::GetFlag(FLAGS_heartbeat_timeout_secs) * 1000);
  o.orphan_grace_ms = static_cast<int>(absl::GetFlag(FLAGS_orphan_grace_secs) * 1000);
  return o;
}

absl::StatusOr<WorkerServer> StartWorkerServer(const df::ClusterSpec& cluster, int task, const std::string& address) {
  WorkerServer out;
  out.target = absl::StrCat("grpc://", address);
  if (!absl::GetFlag(FLAGS_start_server)) return out;
  DF_ASSIGN_OR_RETURN(out.server, df::Server::Create(cluster, "worker", task, BaseServerOptions()));
  DF_RETURN_IF_ERROR(out.server->Start());
  out.target = out.server->target();
  return out;
}

absl::StatusOr<df::data::DataSets> ReadWorkerShard(int task, int num_workers, bool with_test_set) {
  return ReadShard(task % std::max(1, num_workers), num_workers, task, with_test_set);
}

absl::StatusOr<std::pair<int, int>> LiveShard(const std::string& coordinator_address, int task) {
  absl::StatusOr<df::WorkerShard> shard = df::LiveWorkerShard(coordinator_address, task);
  if (!shard.ok()) return shard.status();
  return std::make_pair(shard->index, shard->count);
}

absl::StatusOr<df::data::DataSets> ReadShard(int shard, int num_shards, int task, bool with_test_set) {
  df::data::ShardOptions o;
  o.num_shards = std::max(1, num_shards);
  o.shard_index = shard % o.num_shards;
  o.seed = 100 + static_cast<uint64_t>(task);
  o.validation = false;
  o.test = with_test_set;
  return df::data::ReadDataSetShard(absl::GetFlag(FLAGS_data_dir), o);
}

absl::StatusOr<double> TestAccuracy(df::Session* session, const df::Output& images, const df::Output& labels,
                                    const df::Output& accuracy, const df::data::DataSet& test) {
  const int64_t n = test.num_examples(), chunk = 1000;
  if (n == 0) return absl::FailedPreconditionError("this task did not read the test set");
  double hits = 0;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    DF_ASSIGN_OR_RETURN(
        std::vector<df::Tensor> r,
        session->Run({{images, test.images().Slice(b, e)}, {labels, test.labels().Slice(b, e)}}, {accuracy}));
    hits += r[0].scalar<float>() * static_cast<double>(e - b);
  }
  return hits / static_cast<double>(n);
}

}  // namespace mnist_distributed
