// Synchronous between-graph training on a real in-process cluster (1 ps + 3
// workers, gRPC on loopback): each replica builds its own graph and runs its
// own MonitoredSession against its own worker task, as separate worker
// processes would. The model makes every update checkable: replica r's loss
// is c_r * sum(w), so its gradient is c_r everywhere and each applied step
// moves w by -lr * (the average of the c_r that were aggregated). The sparse
// variant looks rows of a table up instead (loss c_r * sum(table[ids_r])):
// its gradients are IndexedSlices, aggregated by the sparse accumulator.
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/supervisor.h"
#include "distflow/train/sync_replicas_optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/graph.pb.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

constexpr double kLr = 0.5;
constexpr float kGrad[] = {1.0f, 2.0f, 4.0f};  // c_r

// Threads wait here until all `n` have arrived.
class StartLine {
 public:
  explicit StartLine(int n) : left_(n) {}
  void ArriveAndWait() {
    absl::MutexLock lock(&mu_);
    --left_;
    auto all_here = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return left_ <= 0; };
    mu_.Await(absl::Condition(&all_here));
  }

 private:
  absl::Mutex mu_;
  int left_ ABSL_GUARDED_BY(mu_);
};

class SyncReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 3);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto servers = StartLocalCluster(spec_);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
  }
  std::string Target(int worker) {
    for (auto& s : servers_)
      if (s->task_name() == "/job:worker/replica:0/task:" + std::to_string(worker)) return s->target();
    return "";
  }

  struct Result {
    absl::Status status;
    int64_t last_step = -1;
    int local_steps = 0;
    std::vector<float> w;
    int64_t steps_applied = 0, dropped = 0;
    std::set<std::string> ops;  // the graph's op types (sparse runs)
  };

  // One replica's training loop until the global step reaches `last_step`
  // (or `max_local_steps` of its own). With `together`, it starts training
  // only once every replica counted on it has its session.
  Result RunReplica(int replica, SyncReplicasOptions sync, int64_t last_step, int max_local_steps = 1 << 30,
                    StartLine* together = nullptr, bool sparse = false) {
    Result res;
    auto fail = [&res](absl::Status st) {
      res.status = std::move(st);
      return res;
    };
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(spec_, "/job:worker/task:" + std::to_string(replica)));
    Output w = sparse ? ops::MakeVariable(
                            s.WithOpName("table"),
                            ops::Const(s, Tensor::FromVector<float>(std::vector<float>(10, 0.5f), TensorShape({5, 2}))))
                      : ops::MakeVariable(s.WithOpName("w"), ops::Const(s, {0.0f, 0.0f}, TensorShape({2})));
    Output step = CreateGlobalStep(s);
    const std::vector<int32_t> ids[3] = {{1, 3, 1}, {3}, {4}};
    Output loss =
        sparse
            ? ops::Mul(s, ops::Const(s, kGrad[replica]),
                       ops::Sum(s, ops::Gather(s, w, ops::Const(s, Tensor::FromVector<int32_t>(ids[replica]))), {0, 1}))
            : ops::Mul(s, ops::Const(s, kGrad[replica]), ops::Sum(s, w, {0}));
    sync.replica_id = replica;
    auto opt = SyncReplicasOptimizer::Create(std::make_unique<GradientDescentOptimizer>(kLr), sync);
    if (!opt.ok()) return fail(opt.status());
    auto train = (*opt)->Minimize(s, loss, &step);
    if (!train.ok()) return fail(train.status());
    if (sparse) {
      proto::GraphDef def;
      root.ToGraphDef(&def);
      for (const auto& n : def.node()) res.ops.insert(n.op());
    }
    SupervisorOptions o;
    o.is_chief = replica == 0;
    o.global_step = step;
    o.ready_timeout = absl::Seconds(60);
    o.session_options.wait_for_cluster_ms = 20000;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back((*opt)->MakeSessionRunHook(replica == 0));
    hooks.push_back(std::make_unique<StopAtStepHook>(last_step));
    auto session = MonitoredSession::Create(root, Target(replica), o, std::move(hooks));
    if (together != nullptr) together->ArriveAndWait();  // a failed session arrives too
    if (!session.ok()) return fail(session.status());
    while (!(*session)->ShouldStop() && res.local_steps < max_local_steps) {
      auto r = (*session)->Run({}, {}, {*train});
      if (!r.ok()) {
        res.status = r.status();
        break;
      }
      ++res.local_steps;
    }
    res.last_step = (*session)->global_step();
    auto wv = (*session)->raw_session()->Run({w});
    if (wv.ok()) res.w.assign((*wv)[0].flat<float>().begin(), (*wv)[0].flat<float>().end());
    absl::Status closed = (*session)->Close();
    if (res.status.ok()) res.status = closed;
    res.steps_applied = (*opt)->stats().steps_applied.load();
    res.dropped = (*opt)->stats().stale_gradients_dropped.load();
    return res;
  }

  ClusterSpec spec_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(SyncReplicasTest, EveryStepAveragesAllReplicasOnce) {
  SyncReplicasOptions sync;
  sync.replicas_to_aggregate = 3;
  sync.total_num_replicas = 3;
  constexpr int64_t kSteps = 12;
  Result res[3];
  std::vector<std::thread> threads;
  // All three start together, so no replica computes a gradient for a
  // step the others have already completed (it would be dropped as stale).
  StartLine together(3);
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] { res[r] = RunReplica(r, sync, kSteps, 1 << 30, &together); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(res[r].status.ok()) << "replica " << r << ": " << res[r].status;
    EXPECT_EQ(res[r].last_step, kSteps) << "replica " << r;
    // With all three needed, nobody can run ahead or fall behind.
    EXPECT_EQ(res[r].local_steps, kSteps) << "replica " << r;
  }
  EXPECT_EQ(res[0].steps_applied, kSteps);
  EXPECT_EQ(res[0].dropped, 0);
  // Each step: w -= lr * (1 + 2 + 4) / 3.
  const float expected = static_cast<float>(-kLr * kSteps * 7.0 / 3.0);
  ASSERT_EQ(res[0].w.size(), 2u);
  EXPECT_NEAR(res[0].w[0], expected, 1e-4);
  EXPECT_NEAR(res[0].w[1], expected, 1e-4);
}

// IndexedSlices gradients go through the sparse accumulator (only the
// looked-up rows travel) and the chief applies a sparse update: each step
// moves row k by -lr * (sum over replicas of c_r * (times k is in ids_r)) / 3,
// as the dense average would, and the rows nobody looks up stay as they were.
TEST_F(SyncReplicasTest, SparseGradientsAreAggregatedAsRows) {
  SyncReplicasOptions sync;
  sync.replicas_to_aggregate = 3;
  sync.total_num_replicas = 3;
  constexpr int64_t kSteps = 5;
  Result res[3];
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] { res[r] = RunReplica(r, sync, kSteps, 1 << 30, nullptr, true); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(res[r].status.ok()) << "replica " << r << ": " << res[r].status;
    EXPECT_EQ(res[r].last_step, kSteps) << "replica " << r;
  }
  EXPECT_TRUE(res[0].ops.count("SparseAccumulatorApplyGradient"));
  EXPECT_TRUE(res[0].ops.count("SparseAccumulatorTakeGradient"));
  EXPECT_FALSE(res[0].ops.count("AccumulatorApplyGradient"));
  ASSERT_EQ(res[0].w.size(), 10u);
  // Row 1: replica 0 twice (c = 1); row 3: replica 0 (1) and 1 (2); row 4: replica 2 (4).
  const double per_step[5] = {0, 2.0 / 3, 0, 3.0 / 3, 4.0 / 3};
  for (int row = 0; row < 5; ++row) {
    for (int j = 0; j < 2; ++j) {
      const float got = res[0].w[static_cast<size_t>(row * 2 + j)];
      if (per_step[row] == 0) {
        EXPECT_EQ(got, 0.5f) << "row " << row << " is never looked up";
      } else {
        EXPECT_NEAR(got, 0.5 - kLr * kSteps * per_step[row], 1e-5) << "row " << row;
      }
    }
  }
}

TEST_F(SyncReplicasTest, BackupReplicaStopsAndTheOtherTwoCarryOn) {
  SyncReplicasOptions sync;
  sync.replicas_to_aggregate = 2;
  sync.total_num_replicas = 3;
  sync.step_timeout = absl::Seconds(60);
  constexpr int64_t kSteps = 30;
  Result res[3];
  std::vector<std::thread> threads;
  // All three start together: otherwise the two others (2 of 3 make a step)
  // could finish every step before replica 2 had its session.
  StartLine together(3);
  for (int r = 0; r < 3; ++r) {
    // Replica 2 stops after 5 of its own steps, as a worker that died would.
    threads.emplace_back([&, r] { res[r] = RunReplica(r, sync, kSteps, r == 2 ? 5 : 1 << 30, &together); });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(res[2].status.ok()) << res[2].status;
  EXPECT_EQ(res[2].local_steps, 5);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(res[r].status.ok()) << "replica " << r << ": " << res[r].status;
    EXPECT_EQ(res[r].last_step, kSteps) << "replica " << r;
  }
  EXPECT_EQ(res[0].steps_applied, kSteps);
  // Every update is the mean of two or three of {1, 2, 4}: between 1.5 and 3 per step.
  ASSERT_EQ(res[0].w.size(), 2u);
  EXPECT_LE(res[0].w[0], -kLr * kSteps * 1.5 + 1e-3);
  EXPECT_GE(res[0].w[0], -kLr * kSteps * 3.0 - 1e-3);
}

TEST_F(SyncReplicasTest, AMissingReplicaIsNamedWhenTheStepTimesOut) {
  SyncReplicasOptions sync;
  sync.replicas_to_aggregate = 3;
  sync.total_num_replicas = 3;
  sync.step_timeout = absl::Seconds(2);
  Result res[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] { res[r] = RunReplica(r, sync, 10); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(res[r].status.ok()) << "replica " << r;
    EXPECT_EQ(res[r].status.code(), absl::StatusCode::kDeadlineExceeded) << res[r].status;
    const std::string m(res[r].status.message());
    EXPECT_THAT(m, HasSubstr("global step 0 did not complete within 2s"));
    EXPECT_THAT(m, HasSubstr("not by [2]"));
  }
}

}  // namespace
}  // namespace distflow
