// The accumulator and step-barrier ops in one process (their state lives in
// the local session's device across runs), and SyncReplicasOptimizer's
// argument checks. Training across real servers: tests/integration/sync_replicas_test.cc.
#include "distflow/train/sync_replicas_optimizer.h"

#include <thread>

#include "absl/time/clock.h"
#include "base/metrics.h"
#include "base/wait_until.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "gmock/gmock.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

std::function<void(proto::NodeDef*)> Acc(std::function<void(proto::NodeDef*)> more = nullptr) {
  return [more](proto::NodeDef* n) {
    SetAttrType(n, "T", DT_FLOAT);
    SetAttrString(n, "shared_name", "w/acc");
    if (more) more(n);
  };
}
std::function<void(proto::NodeDef*)> Barrier(std::function<void(proto::NodeDef*)> more = nullptr) {
  return [more](proto::NodeDef* n) {
    SetAttrString(n, "shared_name", "barrier");
    if (more) more(n);
  };
}

// Ops on one accumulator of float32 [2] gradients, fed step and gradient.
struct AccumulatorGraph {
  Scope root = Scope::NewRootScope();
  Output step = ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  Output grad = ops::Placeholder(root.WithOpName("grad"), DT_FLOAT, PartialShape({-1}));
  Operation set = ops::Raw(root, "AccumulatorSetGlobalStep", {step}, Acc());
  Operation apply0 = ops::Raw(root, "AccumulatorApplyGradient", {step, grad},
                              Acc([](proto::NodeDef* n) { SetAttrInt(n, "replica_id", 0); }));
  Operation apply1 = ops::Raw(root, "AccumulatorApplyGradient", {step, grad},
                              Acc([](proto::NodeDef* n) { SetAttrInt(n, "replica_id", 1); }));
  Output ready = Output(ops::Raw(root, "AccumulatorWaitReady", {}, Acc([](proto::NodeDef* n) {
                                   SetAttrInt(n, "num_required", 2);
                                   SetAttrInt(n, "timeout_ms", 100);
                                 })),
                        0, root);
  Operation take =
      ops::Raw(root, "AccumulatorTakeGradient", {}, Acc([](proto::NodeDef* n) { SetAttrInt(n, "num_required", 2); }));
  Session sess;

  absl::Status Apply(const Operation& op, int64_t s, std::vector<float> g) {
    return sess.Run({{step, Tensor::Scalar<int64_t>(s)}, {grad, Tensor::FromVector<float>(g)}}, {}, {op}).status();
  }
};

double Dropped(const std::string& reason) {
  return Metrics::Global()->GetCounter("distflow_sync_dropped_gradients_total", "", {{"reason", reason}})->value();
}

TEST(Accumulator, AveragesCurrentGradientsAndDropsStaleOnes) {
  const double stale0 = Dropped("stale"), dup0 = Dropped("duplicate"), uninit0 = Dropped("uninitialized");
  AccumulatorGraph g;
  // Uninitialised: the chief has not set the step yet, so nothing counts.
  ASSERT_TRUE(g.Apply(g.apply0, 0, {100, 100}).ok());
  ASSERT_TRUE(g.sess.Run({{g.step, Tensor::Scalar<int64_t>(5)}}, {}, {g.set}).ok());

  ASSERT_TRUE(g.Apply(g.apply0, 4, {50, 50}).ok());  // computed at step 4 < 5: stale
  ASSERT_TRUE(g.Apply(g.apply0, 5, {1, 2}).ok());
  ASSERT_TRUE(g.Apply(g.apply0, 5, {70, 70}).ok());  // replica 0 again for this step: dropped
  auto not_yet = g.sess.Run({g.ready});
  ASSERT_TRUE(not_yet.ok()) << not_yet.status();
  EXPECT_FALSE((*not_yet)[0].scalar<bool>());      // one of two: times out, false
  ASSERT_TRUE(g.Apply(g.apply1, 6, {3, 6}).ok());  // a newer step counts
  auto ready = g.sess.Run({g.ready});
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE((*ready)[0].scalar<bool>());

  auto took = g.sess.Run({Output(g.take, 0, g.root), Output(g.take, 1, g.root)});
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({2, 4}), (*took)[0]);
  EXPECT_EQ((*took)[1].scalar<int64_t>(), 3);  // uninitialised, stale, duplicate
  // The same drops, by reason, in the task's metrics (its status page's /metrics).
  EXPECT_EQ(Dropped("stale") - stale0, 1);
  EXPECT_EQ(Dropped("duplicate") - dup0, 1);
  EXPECT_EQ(Dropped("uninitialized") - uninit0, 1);

  // The take advanced the accumulator to step 6: step-5 gradients are late now.
  ASSERT_TRUE(g.Apply(g.apply1, 5, {9, 9}).ok());
  auto empty = g.sess.Run({Output(g.take, 0, g.root)});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("holds 0 gradients for step 6, 2 are required"));
}

// The V2 ops take the number of gradients as an input, so the chief can
// change it from one step to the next (elastic synchronous training).
TEST(Accumulator, TheV2OpsTakeTheRequiredCountAsAnInput) {
  AccumulatorGraph g;
  Output required = ops::Placeholder(g.root.WithOpName("required"), DT_INT64, PartialShape({}));
  Output ready = Output(ops::Raw(g.root, "AccumulatorWaitReadyV2", {required},
                                 Acc([](proto::NodeDef* n) { SetAttrInt(n, "timeout_ms", 100); })),
                        0, g.root);
  Operation take = ops::Raw(g.root, "AccumulatorTakeGradientV2", {required}, Acc());
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  auto with = [&](int64_t n) { return FeedDict{{required, Tensor::Scalar<int64_t>(n)}}; };
  ASSERT_TRUE(g.sess.Run({{g.step, Tensor::Scalar<int64_t>(0)}}, {}, {g.set}).ok());
  ASSERT_TRUE(g.Apply(g.apply0, 0, {2, 4}).ok());
  auto two = g.sess.Run(with(2), {ready});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_FALSE((*two)[0].scalar<bool>()) << "one gradient of two";
  auto one = g.sess.Run(with(1), {ready});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE((*one)[0].scalar<bool>()) << "one gradient of one";
  auto refused = g.sess.Run(with(2), {Output(take, 0, g.root)});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("holds 1 gradients for step 0, 2 are required"));
  auto took = g.sess.Run(with(1), {Output(take, 0, g.root)});
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({2, 4}), (*took)[0]);
  auto zero = g.sess.Run(with(0), {ready});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("'num_required' must be at least 1, got 0"));
}

// Sparse gradients (IndexedSlices) of a [5, 2] table: the take is the
// distinct rows, in order, each the sum of its rows over the gradients
// divided by their number -- the dense average's non-zero rows.
TEST(SparseAccumulator, AveragesRowsAsTheDenseAverageWould) {
  Scope root = Scope::NewRootScope();
  Output step = ops::Placeholder(root, DT_INT64, PartialShape({}));
  Output ids = ops::Placeholder(root, DT_INT64, PartialShape({-1}));
  Output rows = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 2}));
  Output num_rows = ops::Placeholder(root, DT_INT64, PartialShape({}));
  Operation set = ops::Raw(root, "AccumulatorSetGlobalStep", {step}, Acc());
  auto apply = [&](int replica) {
    return ops::Raw(root, "SparseAccumulatorApplyGradient", {step, ids, rows, num_rows},
                    Acc([replica](proto::NodeDef* n) { SetAttrInt(n, "replica_id", replica); }));
  };
  Operation apply0 = apply(0), apply1 = apply(1), apply2 = apply(2);
  Operation dense =
      ops::Raw(root, "AccumulatorApplyGradient", {step, ops::Const(root, Tensor::FromVector<float>({1, 1}))},
               Acc([](proto::NodeDef* n) { SetAttrInt(n, "replica_id", 3); }));
  Operation take = ops::Raw(root, "SparseAccumulatorTakeGradient", {},
                            Acc([](proto::NodeDef* n) { SetAttrInt(n, "num_required", 2); }));
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto run = [&](const Operation& op, std::vector<int64_t> i, std::vector<float> v, int64_t n = 5) {
    const int64_t k = static_cast<int64_t>(i.size());
    return sess
        .Run({{step, Tensor::Scalar<int64_t>(0)},
              {ids, Tensor::FromVector<int64_t>(i)},
              {rows, Tensor::FromVector<float>(v, TensorShape({k, 2}))},
              {num_rows, Tensor::Scalar<int64_t>(n)}},
             {}, {op})
        .status();
  };
  ASSERT_TRUE(sess.Run({{step, Tensor::Scalar<int64_t>(0)}}, {}, {set}).ok());
  ASSERT_TRUE(run(apply0, {3, 1, 3}, {1, 2, 10, 20, 3, 4}).ok());
  ASSERT_TRUE(run(apply1, {1}, {6, 8}).ok());
  // A bad id or another table's gradient is an error naming it; nothing is added.
  absl::Status bad = run(apply2, {0, 5}, {1, 1, 1, 1});
  EXPECT_THAT(std::string(bad.message()), HasSubstr("'w/acc': indices[1] = 5 is not in [0, 5)"));
  bad = run(apply2, {0}, {1, 1}, 7);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("holds rows of a 5-row tensor"));
  bad = sess.Run({{step, Tensor::Scalar<int64_t>(0)}}, {}, {dense}).status();
  EXPECT_THAT(std::string(bad.message()), HasSubstr("got a dense gradient but holds sparse (IndexedSlices) ones"));

  auto took = sess.Run({Output(take, 0, root), Output(take, 1, root), Output(take, 2, root), Output(take, 3, root)});
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<int64_t>({1, 3}), (*took)[0]);
  // Row 1: (10 + 6) / 2, (20 + 8) / 2; row 3: (1 + 3) / 2, (2 + 4) / 2.
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({8, 14, 2, 3}, TensorShape({2, 2})), (*took)[1]);
  EXPECT_EQ((*took)[2].scalar<int64_t>(), 5);
  EXPECT_EQ((*took)[3].scalar<int64_t>(), 0);
}

TEST(Accumulator, ShapeMismatchNamesBothShapes) {
  AccumulatorGraph g;
  ASSERT_TRUE(g.sess.Run({{g.step, Tensor::Scalar<int64_t>(0)}}, {}, {g.set}).ok());
  ASSERT_TRUE(g.Apply(g.apply0, 0, {1, 2}).ok());
  absl::Status bad = g.Apply(g.apply1, 0, {1, 2, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("'w/acc' holds shape [2], got a gradient of shape [3]"));
}

TEST(Accumulator, SettingAnotherStepDropsWhatWasAccumulated) {
  AccumulatorGraph g;
  ASSERT_TRUE(g.sess.Run({{g.step, Tensor::Scalar<int64_t>(0)}}, {}, {g.set}).ok());
  ASSERT_TRUE(g.Apply(g.apply0, 0, {1, 1}).ok());
  ASSERT_TRUE(g.sess.Run({{g.step, Tensor::Scalar<int64_t>(3)}}, {}, {g.set}).ok());  // a restore
  ASSERT_TRUE(g.Apply(g.apply0, 3, {2, 2}).ok());
  ASSERT_TRUE(g.Apply(g.apply1, 3, {4, 4}).ok());
  auto took = g.sess.Run({Output(g.take, 0, g.root), Output(g.take, 1, g.root)});
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({3, 3}), (*took)[0]);
  EXPECT_EQ((*took)[1].scalar<int64_t>(), 1);
}

struct BarrierGraph {
  Scope root = Scope::NewRootScope();
  Output step = ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  Operation release = ops::Raw(root, "SyncBarrierRelease", {step}, Barrier());
  Output Local(int replica) {
    return Output(ops::Raw(root, "SyncBarrierLocalStep", {},
                           Barrier([replica](proto::NodeDef* n) { SetAttrInt(n, "replica_id", replica); })),
                  0, root);
  }
  Output Wait(int replica, int64_t timeout_ms) {
    return Output(ops::Raw(root, "SyncBarrierWait", {step}, Barrier([=](proto::NodeDef* n) {
                             SetAttrInt(n, "replica_id", replica);
                             SetAttrInt(n, "replicas_to_aggregate", 2);
                             SetAttrInt(n, "total_num_replicas", 3);
                             SetAttrInt(n, "timeout_ms", timeout_ms);
                           })),
                  0, root);
  }
  absl::StatusOr<std::vector<Tensor>> Run(const Output& o, int64_t s) {
    return sess.Run({{step, Tensor::Scalar<int64_t>(s)}}, {o});
  }
  absl::Status Release(int64_t s) { return sess.Run({{step, Tensor::Scalar<int64_t>(s)}}, {}, {release}).status(); }
  // Waits (polling SyncBarrierStatus) until `replica` has reported for the
  // barrier's current step, i.e. its wait is parked; false after 30 s.
  bool WaitUntilReported(int64_t replica) {
    Operation status = ops::Raw(root, "SyncBarrierStatus", {}, Barrier());
    bool reported = false;
    WaitUntil(
        [&] {
          auto r = sess.Run({Output(status, 1, root)});
          if (!r.ok()) return true;  // gives up: not reported
          for (int64_t who : (*r)[0].flat<int64_t>()) reported = reported || who == replica;
          return reported;
        },
        absl::Seconds(30), absl::Milliseconds(10));
    return reported;
  }
  Session sess;
};

TEST(StepBarrier, HoldsWorkersUntilTheStepIsApplied) {
  BarrierGraph g;
  Output local1 = g.Local(1), wait1 = g.Wait(1, 60'000);
  auto before = g.sess.Run({local1});
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ((*before)[0].scalar<int64_t>(), -1);  // the chief has not initialised it
  ASSERT_TRUE(g.Release(7).ok());
  auto at = g.sess.Run({local1});
  ASSERT_TRUE(at.ok());
  EXPECT_EQ((*at)[0].scalar<int64_t>(), 7);

  absl::StatusOr<std::vector<Tensor>> waited;
  std::thread worker([&] { waited = g.Run(wait1, 7); });
  ASSERT_TRUE(g.WaitUntilReported(1));
  ASSERT_TRUE(g.Release(8).ok());  // the chief applied step 7
  worker.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ((*waited)[0].scalar<int64_t>(), 8);
  auto after = g.sess.Run({local1});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].scalar<int64_t>(), 8);

  // A worker that reports for a step already applied goes on at once.
  auto late = g.Run(wait1, 5);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ((*late)[0].scalar<int64_t>(), 8);
  // A restore of an older step releases workers waiting at a newer one.
  std::thread w2([&] { waited = g.Run(wait1, 8); });
  ASSERT_TRUE(g.WaitUntilReported(1));
  ASSERT_TRUE(g.Release(4).ok());
  w2.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ((*waited)[0].scalar<int64_t>(), 4);
}

// Waits that park while releases race them: each must end exactly once, its
// step still alive (run under the sanitizers by scripts/sanitize.sh).
TEST(StepBarrier, WaitersRacingReleasesAllFinish) {
  BarrierGraph g;
  ASSERT_TRUE(g.Release(0).ok());
  constexpr int64_t kLast = 1500;
  std::vector<Output> waits = {g.Wait(0, 20'000), g.Wait(1, 20'000), g.Wait(2, 20'000)};
  std::vector<absl::Status> errors(3);
  std::vector<int> rounds(3, 0);
  std::vector<std::thread> workers;
  for (int r = 0; r < 3; ++r) {
    workers.emplace_back([&, r] {
      int64_t local = 0;
      while (local != kLast) {
        auto got = g.Run(waits[r], local);
        if (!got.ok()) {
          errors[r] = got.status();
          return;
        }
        local = (*got)[0].scalar<int64_t>();
        ++rounds[r];
      }
    });
  }
  for (int64_t s = 1; s <= kLast; ++s) ASSERT_TRUE(g.Release(s).ok());
  for (auto& t : workers) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(errors[r].ok()) << errors[r];
    EXPECT_GE(rounds[r], 1);
  }
}

TEST(StepBarrier, DeadlineNamesTheStepAndTheReplicasThatDidNotReport) {
  BarrierGraph g;
  ASSERT_TRUE(g.Release(12).ok());
  Output wait0 = g.Wait(0, 300), wait2 = g.Wait(2, 300);
  std::thread other([&] { (void)g.Run(wait2, 12); });
  ASSERT_TRUE(g.WaitUntilReported(2));
  const absl::Time start = absl::Now();
  auto r = g.Run(wait0, 12);
  other.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  const std::string m(r.status().message());
  EXPECT_THAT(m, HasSubstr("global step 12 did not complete within 300ms"));
  EXPECT_THAT(m, HasSubstr("reported by worker replicas [0, 2], not by [1]"));
}

TEST(StepBarrier, UninitialisedBarrierTimesOutNamingTheChief) {
  BarrierGraph g;
  auto r = g.Run(g.Wait(1, 200), -1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("the chief has not initialised the step barrier"));
}

TEST(StepBarrier, ACancelledStepStopsWaiting) {
  BarrierGraph g;
  ASSERT_TRUE(g.Release(0).ok());
  Output wait = g.Wait(0, 600'000);
  RunOptions o;
  o.timeout_ms = 300;  // the step's deadline cancels the parked wait
  const absl::Time start = absl::Now();
  auto r = g.sess.Run({{g.step, Tensor::Scalar<int64_t>(0)}}, {wait}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // And the barrier still works afterwards.
  ASSERT_TRUE(g.Release(1).ok());
  auto again = g.Run(wait, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].scalar<int64_t>(), 1);
}

TEST(SyncReplicasOptimizer, RejectsImpossibleReplicaCounts) {
  auto make = [](int to_aggregate, int total, int id) {
    SyncReplicasOptions o;
    o.replicas_to_aggregate = to_aggregate;
    o.total_num_replicas = total;
    o.replica_id = id;
    return SyncReplicasOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), o).status();
  };
  absl::Status more = make(4, 3, 0);
  EXPECT_EQ(more.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(more.message()),
              HasSubstr("replicas_to_aggregate (4) is larger than total_num_replicas (3)"));
  EXPECT_THAT(std::string(make(0, 3, 0).message()), HasSubstr("at least 1"));
  EXPECT_THAT(std::string(make(2, 3, 3).message()), HasSubstr("replica_id 3 is not in [0, 3)"));
  EXPECT_TRUE(make(2, 0, 1).ok());  // total defaults to replicas_to_aggregate
  // Elastic: a worker that joined takes part with its task index, past the
  // configured replicas.
  SyncReplicasOptions o;
  o.replicas_to_aggregate = 2;
  o.replica_id = 5;
  o.live_replicas = [] { return absl::StatusOr<int>(3); };
  EXPECT_TRUE(SyncReplicasOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), o).ok());
  o.min_replicas = 0;
  EXPECT_THAT(
      std::string(SyncReplicasOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), o).status().message()),
      HasSubstr("min_replicas must be at least 1, got 0"));
}

TEST(SyncReplicasOptimizer, NeedsTheGlobalStepAndIsBuiltOnce) {
  Scope root = Scope::NewRootScope();
  Output w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 1.0f));
  Output loss = ops::Mul(root, w, w);
  auto opt = SyncReplicasOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), {});
  ASSERT_TRUE(opt.ok());
  auto no_step = (*opt)->Minimize(root, loss, nullptr);
  EXPECT_THAT(std::string(no_step.status().message()), HasSubstr("needs the global step"));
  Output step = CreateGlobalStep(root);
  ASSERT_TRUE((*opt)->Minimize(root, loss, &step).ok());
  auto twice = (*opt)->Minimize(root, loss, &step);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace distflow
