// Cycle-time fusion (Horovod's HOROVOD_CYCLE_TIME) between real servers in
// the test process: each worker runs its own grpc:// session, so the plans
// and the fused reductions travel over the workers' transport, and the
// servers' /metrics count the reductions each step issues.
#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "worker_cluster.h"

namespace distflow {
namespace {

class FusionCycleClusterTest : public ::testing::Test, public cluster_test::WorkerCluster {
 protected:
  // Servers with /metrics (a status port each).
  static ServerOptions WithMetrics() {
    ServerOptions options;
    options.status_port = 0;
    return options;
  }
  // The ok reduce runs the servers of this process have counted.
  double ReduceRuns(int port) {
    // Absent (negative) until the first run.
    return std::max(0.0, subprocess::MetricValue(subprocess::ScrapeMetrics(port),
                                                 R"(distflow_collective_runs_total{op="reduce",status="ok"})"));
  }
};

// The same model trained with every gradient reduced alone and with a cycle
// time ends with the same bytes on every worker, while the cycle makes each
// step issue one reduction per dtype instead of one per gradient: all of a
// step's gradients come within the (long) cycle, and the buffer flushes as
// soon as the last one has, without waiting for the cycle's end.
TEST_F(FusionCycleClusterTest, ACycleTimeFusesAStepsGradientsAndMatchesUnfused) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 3;
  Start(kWorkers, WithMetrics());
  const int port = ServerOf(0)->status_port();
  ASSERT_GT(port, 0);
  struct Config {
    const char* name;
    int64_t threshold;
    double cycle_ms;
    int runs_per_step;  // per rank
  };
  // Five gradients: four float32 (one stream), one float64 (another).
  const std::vector<Config> configs = {{"unfused", 0, 0, 5}, {"cycle", int64_t{64} << 20, 60000, 2}};
  std::vector<std::vector<std::string>> values(configs.size(), std::vector<std::string>(kWorkers));
  std::vector<absl::Status> status(kWorkers);
  std::vector<double> runs(configs.size(), 0);
  auto bytes = [](const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes()); };
  for (size_t c = 0; c < configs.size(); ++c) {
    const double before = ReduceRuns(port);
    OnEveryWorker(kWorkers, [&](int task) {
      auto fail = [&](absl::Status st) { status[static_cast<size_t>(task)] = st; };
      Scope root = Scope::NewRootScope();
      Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
      Tensor xs(DT_FLOAT, TensorShape({6, 4})), ys(DT_FLOAT, TensorShape({6, 1}));
      for (int i = 0; i < 24; ++i)
        xs.flat<float>()[static_cast<size_t>(i)] = static_cast<float>((i * 5 + task) % 9) - 4;
      for (int i = 0; i < 6; ++i) ys.flat<float>()[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i + task);
      auto init = [&](std::initializer_list<float> v, const TensorShape& shape) { return ops::Const(s, v, shape); };
      Output w1 = ops::MakeVariable(
          s.WithOpName("w1"),
          init({.1f, -.2f, .3f, .4f, -.5f, .6f, .7f, .8f, -.9f, .1f, .2f, -.3f}, TensorShape({4, 3})));
      Output b1 = ops::MakeVariable(s.WithOpName("b1"), init({.01f, .02f, -.03f}, TensorShape({3})));
      Output w2 = ops::MakeVariable(s.WithOpName("w2"), init({.5f, -.25f, .125f}, TensorShape({3, 1})));
      Output b2 = ops::MakeVariable(s.WithOpName("b2"), init({.1f}, TensorShape({1})));
      Output v = ops::MakeVariable(s.WithOpName("s"), ops::Const(s, Tensor::FromVector<double>({1.5, -2.5})));
      Output y = ops::Add(s, ops::MatMul(s, ops::Add(s, ops::MatMul(s, ops::Const(s, xs), w1), b1), w2), b2);
      Output fit = ops::Mean(s, ops::Square(s, ops::Sub(s, y, ops::Const(s, ys))), {0, 1});
      Output pull = ops::Sum(s, ops::Square(s, ops::Sub(s, v, ops::Const(s, static_cast<double>(task)))), {0});
      Output loss = ops::Add(s, fit, ops::Cast(s, pull, DT_FLOAT));
      CollectiveAllReduceOptions o;
      o.num_replicas = kWorkers;
      o.rank = task;
      o.first_instance_key = 1 + 100 * static_cast<int64_t>(c);
      o.fusion_threshold_bytes = configs[c].threshold;
      o.fusion_cycle_ms = configs[c].cycle_ms;
      o.timeout_seconds = 60;
      auto opt = CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.05), o);
      if (!opt.ok()) return fail(opt.status());
      absl::StatusOr<Operation> train = (*opt)->Minimize(s, loss, nullptr, {w1, b1, w2, b2, v});
      if (!train.ok()) return fail(train.status());
      std::unique_ptr<Session> sess = SessionOf(task);
      if (auto r = sess->Run({}, {}, {ops::GlobalVariablesInitializer(s)}); !r.ok()) return fail(r.status());
      for (int step = 0; step < kSteps; ++step) {
        if (auto r = sess->Run({}, {}, {*train}); !r.ok()) return fail(r.status());
      }
      auto end = sess->Run({w1, b1, w2, b2, v});
      if (!end.ok()) return fail(end.status());
      for (const Tensor& t : *end) values[c][static_cast<size_t>(task)] += bytes(t);
    });
    for (int t = 0; t < kWorkers; ++t) {
      ASSERT_TRUE(status[static_cast<size_t>(t)].ok())
          << configs[c].name << ", worker " << t << ": " << status[static_cast<size_t>(t)];
    }
    runs[c] = ReduceRuns(port) - before;
  }
  for (size_t c = 0; c < configs.size(); ++c) {
    // The servers share this process's registry: every rank's runs.
    EXPECT_EQ(runs[c], configs[c].runs_per_step * kSteps * kWorkers) << configs[c].name;
    for (int t = 0; t < kWorkers; ++t) {
      EXPECT_EQ(values[c][static_cast<size_t>(t)], values[0][0]) << configs[c].name << ", worker " << t;
    }
  }
}

// A rank whose server is gone before the group's first collective fails
// the fused reduction on the others with an error naming it, instead of
// leaving them waiting (for the dead rank, or in a rebuild of the group
// that needs it).
TEST_F(FusionCycleClusterTest, ADeadRankFailsTheFusedReductionNamingIt) {
  constexpr int kWorkers = 3;
  Start(kWorkers);
  std::vector<std::vector<Output>> sums(kWorkers - 1);
  std::vector<std::unique_ptr<Session>> sessions(kWorkers - 1);
  std::vector<Scope> roots(kWorkers - 1, Scope::NewRootScope());
  for (int task = 0; task < kWorkers - 1; ++task) {
    Scope s = roots[static_cast<size_t>(task)].WithDevice(absl::StrCat("/job:worker/task:", task));
    for (int64_t k = 1; k <= 2; ++k) {
      sums[static_cast<size_t>(task)].emplace_back(
          ops::Raw(s, "CollectiveReduce", {ops::Const(s, Tensor::FromVector<float>({1, 2}))},
                   {{"group_size", kWorkers},
                    {"group_key", 1},
                    {"instance_key", k},
                    {"merge_op", "Add"},
                    {"final_op", "Id"},
                    {"timeout_seconds", 60.0},
                    {"fusion_cycle_ms", 60000.0},
                    {"fusion_set_size", int64_t{2}}}),
          0, s);
    }
    sessions[static_cast<size_t>(task)] = SessionOf(task);
  }
  std::vector<absl::Status> status(kWorkers - 1);
  StopWorker(2);
  OnEveryWorker(2, [&](int task) {
    status[static_cast<size_t>(task)] =
        sessions[static_cast<size_t>(task)]->Run(sums[static_cast<size_t>(task)]).status();
  });
  for (int t = 0; t < 2; ++t) {
    const absl::Status& s = status[static_cast<size_t>(t)];
    ASSERT_FALSE(s.ok()) << "worker " << t << " reduced without worker 2";
    EXPECT_TRUE(absl::StrContains(s.message(), "rank 2 (/job:worker/replica:0/task:2)")) << "worker " << t << ": " << s;
  }
}

}  // namespace
}  // namespace distflow
