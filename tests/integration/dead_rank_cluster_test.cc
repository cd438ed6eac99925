// A rank whose server is gone before the group's first collective, between
// real servers in the test process: the surviving ranks' first runs fail
// with an error naming it, whichever of them fails first, instead of one of
// them waiting in a rebuild of the group that needs the dead rank. Both a
// plain CollectiveReduce and a cycle-fused one.
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

constexpr int kWorkers = 3;
constexpr int kDead = 2;

class DeadRankClusterTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(0, kWorkers);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec, ServerOptions());
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
  }
  Server* ServerOf(int task) {
    for (auto& s : servers_)
      if (s != nullptr && s->task_name() == TaskName("worker", task)) return s.get();
    return nullptr;
  }
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_P(DeadRankClusterTest, ARankGoneBeforeTheFirstCollectiveFailsItOnEveryOtherRankNamingIt) {
  const bool fused = GetParam();
  std::vector<Scope> roots(kWorkers - 1, Scope::NewRootScope());
  std::vector<std::vector<Output>> sums(kWorkers - 1);
  std::vector<std::unique_ptr<Session>> sessions(kWorkers - 1);
  for (int task = 0; task < kWorkers - 1; ++task) {
    Scope s = roots[static_cast<size_t>(task)].WithDevice(absl::StrCat("/job:worker/task:", task));
    // Fused: two reductions in one flush. Unfused: one (two would fail each
    // other's runs by cancelling the step, naming the rank whose step ended).
    for (int64_t k = 1; k <= (fused ? 2 : 1); ++k) {
      ops::Attrs attrs = {{"group_size", kWorkers}, {"group_key", 1},   {"instance_key", k},
                          {"merge_op", "Add"},      {"final_op", "Id"}, {"timeout_seconds", 60.0}};
      if (fused) {
        attrs.push_back({"fusion_cycle_ms", 60000.0});
        attrs.push_back({"fusion_set_size", int64_t{2}});
      }
      sums[static_cast<size_t>(task)].emplace_back(
          ops::Raw(s, "CollectiveReduce", {ops::Const(s, Tensor::FromVector<float>({1, 2}))}, attrs), 0, s);
    }
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    o.device_filters = {absl::StrCat("/job:worker/task:", task)};
    sessions[static_cast<size_t>(task)] = std::make_unique<Session>(ServerOf(task)->target(), o);
  }
  for (auto& server : servers_) {
    if (server->task_name() == TaskName("worker", kDead)) server.reset();
  }
  // The step's deadline ends a run that waits for a rebuild needing the
  // dead rank: its error then names no rank, and the test fails.
  std::vector<absl::Status> status(kWorkers - 1);
  std::vector<std::thread> threads;
  for (int task = 0; task < kWorkers - 1; ++task) {
    threads.emplace_back([&, task] {
      RunOptions run;
      run.timeout_ms = 30000;
      status[static_cast<size_t>(task)] =
          sessions[static_cast<size_t>(task)]->Run({}, sums[static_cast<size_t>(task)], {}, run).status();
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kWorkers - 1; ++t) {
    const absl::Status& s = status[static_cast<size_t>(t)];
    ASSERT_FALSE(s.ok()) << "worker " << t << " reduced without worker " << kDead;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 2 (/job:worker/replica:0/task:2)")) << "worker " << t << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(DeadRank, DeadRankClusterTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Fused" : "Unfused"; });

}  // namespace
}  // namespace distflow
