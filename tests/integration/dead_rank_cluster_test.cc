// A rank whose server is gone fails the collectives of the surviving ranks
// with an error naming it, between real servers in the test process,
// whichever of them fails first, instead of one of them waiting in a
// rebuild of the group that needs the dead rank: a plain CollectiveReduce,
// a cycle-fused one, and a step of several unfused ones. In the last, a
// rank whose first run fails cancels its step's other runs, and the peers'
// runs that meet those aborts still name the dead rank (the abort carries
// the step's first error), never only the rank whose step was cancelled.
// The rank is gone before the group's first collective, or after a good
// step built the group.
#include <ostream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "worker_cluster.h"

namespace distflow {
namespace {

constexpr int kWorkers = 3;
constexpr int kDead = 2;

struct Case {
  const char* name;
  bool fused;
  int reductions;  // in one step
  bool warm;       // a good step of every rank first (the group is built)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DeadRankClusterTest : public ::testing::TestWithParam<Case>, public cluster_test::WorkerCluster {
 protected:
  void SetUp() override { Start(kWorkers); }
  // Runs the step on workers 0..n-1 at once; their statuses.
  std::vector<absl::Status> RunStep(int n) {
    std::vector<absl::Status> status(static_cast<size_t>(n));
    OnEveryWorker(n, [&](int task) {
      RunOptions run;
      run.timeout_ms = 30000;
      status[static_cast<size_t>(task)] =
          sessions_[static_cast<size_t>(task)]->Run({}, sums_[static_cast<size_t>(task)], {}, run).status();
    });
    return status;
  }
  std::vector<std::vector<Output>> sums_;
  std::vector<std::unique_ptr<Session>> sessions_;
};

TEST_P(DeadRankClusterTest, ADeadRankFailsTheCollectivesOnEveryOtherRankNamingIt) {
  const Case c = GetParam();
  const int ranks = c.warm ? kWorkers : kWorkers - 1;  // those that build a graph
  std::vector<Scope> roots(static_cast<size_t>(ranks), Scope::NewRootScope());
  sums_.resize(static_cast<size_t>(ranks));
  sessions_.resize(static_cast<size_t>(ranks));
  for (int task = 0; task < ranks; ++task) {
    Scope s = roots[static_cast<size_t>(task)].WithDevice(absl::StrCat("/job:worker/task:", task));
    for (int64_t k = 1; k <= c.reductions; ++k) {
      ops::Attrs attrs = {{"group_size", kWorkers}, {"group_key", 1},   {"instance_key", k},
                          {"merge_op", "Add"},      {"final_op", "Id"}, {"timeout_seconds", 60.0}};
      if (c.fused) {
        attrs.push_back({"fusion_cycle_ms", 60000.0});
        attrs.push_back({"fusion_set_size", int64_t{c.reductions}});
      }
      sums_[static_cast<size_t>(task)].emplace_back(
          ops::Raw(s, "CollectiveReduce", {ops::Const(s, Tensor::FromVector<float>({1, 2}))}, attrs), 0, s);
    }
    sessions_[static_cast<size_t>(task)] = SessionOf(task);
  }
  if (c.warm) {
    std::vector<absl::Status> good = RunStep(kWorkers);
    for (int t = 0; t < kWorkers; ++t)
      ASSERT_TRUE(good[static_cast<size_t>(t)].ok()) << "worker " << t << ": " << good[static_cast<size_t>(t)];
    sessions_[kDead].reset();
  }
  StopWorker(kDead);
  // The step's deadline ends a run that waits for a rebuild needing the
  // dead rank: its error then names no rank, and the test fails.
  std::vector<absl::Status> status = RunStep(kWorkers - 1);
  for (int t = 0; t < kWorkers - 1; ++t) {
    const absl::Status& s = status[static_cast<size_t>(t)];
    ASSERT_FALSE(s.ok()) << "worker " << t << " reduced without worker " << kDead;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 2 (/job:worker/replica:0/task:2)")) << "worker " << t << ": " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(DeadRank, DeadRankClusterTest,
                         ::testing::Values(Case{"Unfused", false, 1, false}, Case{"Fused", true, 2, false},
                                           Case{"SeveralUnfused", false, 4, false},
                                           Case{"SeveralUnfusedAfterAGoodStep", false, 4, true}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace distflow
