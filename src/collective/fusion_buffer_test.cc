// Cycle-time fusion (fusion_buffer.h) among N ranks in one process: the
// cycle runs on a timer with a fake clock, so which tensors are "ready
// within one cycle" is set by the test, not by the machine's speed. Runs
// are counted in /metrics (one fused reduction is one run per rank).
#include "collective/fusion_buffer.h"

#include <cstring>
#include <random>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/fake_clock_env.h"
#include "base/metrics.h"
#include "collective/collective_test_util.h"

namespace distflow {
namespace {

constexpr double kCycleMs = 5;

CollectiveParams Grad(int n, int64_t instance, int64_t threshold = 0, int64_t set_size = 0,
                      double cycle_ms = kCycleMs) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = absl::StrCat("grad_", instance);
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = instance;
  p.merge_op = MergeOp::kAdd;
  p.final_op = FinalOp::kId;
  p.dtype = DT_FLOAT;
  p.fusion_cycle_ms = cycle_ms;
  p.fusion_threshold_bytes = threshold;
  p.fusion_set_size = set_size;
  return p;
}

// A tensor of `count` floats, different per rank and instance.
Tensor Values(int64_t count, int rank, int64_t instance) {
  Tensor t(DT_FLOAT, TensorShape({count}));
  for (int64_t i = 0; i < count; ++i) {
    t.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(100 * rank + 10 * instance + i);
  }
  return t;
}

float Sum(int n, int64_t instance, int64_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += static_cast<float>(100 * r + 10 * instance + i);
  return s;
}

struct Result {
  absl::Notification done;
  absl::StatusOr<Tensor> value = absl::UnknownError("not done");
};
using ResultPtr = std::shared_ptr<Result>;

ResultPtr Submit(CollectiveExecutorImpl* ex, const CollectiveParams& p, const Tensor& input,
                 CancellationManager* cm = nullptr) {
  auto out = std::make_shared<Result>();
  ex->Run(p, input, cm, [out](absl::StatusOr<Tensor> r) {
    out->value = std::move(r);
    out->done.Notify();
  });
  return out;
}

double ReduceRuns() {
  return Metrics::Global()
      ->GetCounter("distflow_collective_runs_total", "", {{"op", "reduce"}, {"status", "ok"}})
      ->value();
}

class CycleFusionTest : public ::testing::Test {
 protected:
  void Start(int n) {
    ranks_ = std::make_unique<Ranks>(n);
    for (auto& ex : ranks_->executors) ex->SetFusionTimer(&timer_);
  }
  // The clock passes one cycle: rank 0's cycle ends and it flushes.
  void EndCycle() {
    clock_.Advance(absl::Milliseconds(kCycleMs));
    timer_.Poke();
  }
  static void ExpectSums(const ResultPtr& r, int n, int64_t instance, int64_t count, const std::string& what) {
    ASSERT_TRUE(r->done.WaitForNotificationWithTimeout(kHang)) << what << " never finished";
    ASSERT_TRUE(r->value.ok()) << what << ": " << r->value.status();
    ASSERT_EQ(r->value->NumElements(), count) << what;
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(r->value->flat<float>()[static_cast<size_t>(i)], Sum(n, instance, i)) << what << "[" << i << "]";
    }
  }
  FakeClockEnv clock_;
  Timer timer_{&clock_};
  std::unique_ptr<Ranks> ranks_;
};

// Two tensors ready within one cycle make one reduction; the same two ready
// in different cycles make two. The results are the sums either way.
TEST_F(CycleFusionTest, TensorsReadyWithinOneCycleAreReducedTogether) {
  constexpr int kRanks = 3;
  Start(kRanks);
  const double runs0 = ReduceRuns();
  std::vector<ResultPtr> a, b;
  for (int r = 0; r < kRanks; ++r) {
    a.push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, 1), Values(3, r, 1)));
    b.push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, 2), Values(5, r, 2)));
  }
  EndCycle();
  for (int r = 0; r < kRanks; ++r) {
    ExpectSums(a[r], kRanks, 1, 3, absl::StrCat("a on rank ", r));
    ExpectSums(b[r], kRanks, 2, 5, absl::StrCat("b on rank ", r));
  }
  EXPECT_EQ(ReduceRuns() - runs0, kRanks) << "one fused reduction per rank";

  const double runs1 = ReduceRuns();
  a.clear();
  b.clear();
  for (int r = 0; r < kRanks; ++r) a.push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, 1), Values(3, r, 1)));
  EndCycle();
  for (int r = 0; r < kRanks; ++r) ExpectSums(a[r], kRanks, 1, 3, absl::StrCat("a alone on rank ", r));
  for (int r = 0; r < kRanks; ++r) b.push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, 2), Values(5, r, 2)));
  EndCycle();
  for (int r = 0; r < kRanks; ++r) ExpectSums(b[r], kRanks, 2, 5, absl::StrCat("b alone on rank ", r));
  EXPECT_EQ(ReduceRuns() - runs1, 2 * kRanks) << "a cycle apart: two reductions per rank";
  EXPECT_EQ(ranks_->hub.NumPending(), 0u);
}

// Rank 0 plans what it holds; a rank that has not computed a planned tensor
// yet takes the plan and runs the fused reduction once the tensor comes.
TEST_F(CycleFusionTest, ARankWaitsForThePlannedTensorsItHasNotComputedYet) {
  constexpr int kRanks = 2;
  Start(kRanks);
  std::vector<ResultPtr> a, b;
  a.push_back(Submit(ranks_->executors[0].get(), Grad(kRanks, 1), Values(4, 0, 1)));
  b.push_back(Submit(ranks_->executors[0].get(), Grad(kRanks, 2), Values(2, 0, 2)));
  a.push_back(Submit(ranks_->executors[1].get(), Grad(kRanks, 1), Values(4, 1, 1)));
  EndCycle();  // rank 0 plans {1, 2}; rank 1 holds only 1
  b.push_back(Submit(ranks_->executors[1].get(), Grad(kRanks, 2), Values(2, 1, 2)));
  for (int r = 0; r < kRanks; ++r) {
    ExpectSums(a[r], kRanks, 1, 4, absl::StrCat("a on rank ", r));
    ExpectSums(b[r], kRanks, 2, 2, absl::StrCat("b on rank ", r));
  }
}

// Without the clock moving: the threshold splits four equal tensors into
// two reductions, and the set size flushes as soon as the set is complete.
TEST_F(CycleFusionTest, TheThresholdAndACompleteSetFlushWithoutWaitingForTheCycle) {
  constexpr int kRanks = 3;
  Start(kRanks);
  for (const auto& [threshold, set_size, want_runs] :
       std::vector<std::tuple<int64_t, int64_t, int>>{{2 * 4 * 4, 0, 2}, {0, 4, 1}}) {
    SCOPED_TRACE(absl::StrCat("threshold ", threshold, ", set size ", set_size));
    const double runs0 = ReduceRuns();
    std::vector<std::vector<ResultPtr>> out(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (int64_t k = 1; k <= 4; ++k) {
        out[r].push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, k, threshold, set_size), Values(4, r, k)));
      }
    }
    for (int r = 0; r < kRanks; ++r) {
      for (int64_t k = 1; k <= 4; ++k) ExpectSums(out[r][k - 1], kRanks, k, 4, absl::StrCat("rank ", r, " k ", k));
    }
    EXPECT_EQ(ReduceRuns() - runs0, want_runs * kRanks);
  }
}

// Fused values are bit-identical to each tensor reduced alone (the direct
// exchange reduces every element in rank order either way), averaged too.
TEST_F(CycleFusionTest, FusedResultsAreBitIdenticalToUnfused) {
  constexpr int kRanks = 3;
  Start(kRanks);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  const std::vector<int64_t> sizes = {1, 7, 33, 100};
  std::vector<std::vector<Tensor>> inputs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t n : sizes) {
      Tensor t(DT_FLOAT, TensorShape({n}));
      for (auto& v : t.flat<float>()) v = dist(gen);
      inputs[r].push_back(t);
    }
  }
  std::vector<std::vector<ResultPtr>> fused(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      CollectiveParams p = Grad(kRanks, static_cast<int64_t>(k) + 1, 0, static_cast<int64_t>(sizes.size()));
      p.final_op = FinalOp::kDiv;
      fused[r].push_back(Submit(ranks_->executors[r].get(), p, inputs[r][k]));
    }
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    CollectiveParams alone = Grad(kRanks, 100 + static_cast<int64_t>(k), 0, 0, 0);
    alone.final_op = FinalOp::kDiv;
    std::vector<Tensor> in;
    for (int r = 0; r < kRanks; ++r) in.push_back(inputs[r][k]);
    auto want = ranks_->Run(alone, in);
    for (int r = 0; r < kRanks; ++r) {
      ResultPtr got = fused[r][k];
      ASSERT_TRUE(got->done.WaitForNotificationWithTimeout(kHang));
      ASSERT_TRUE(got->value.ok()) << got->value.status();
      ASSERT_TRUE(want[r].ok()) << want[r].status();
      EXPECT_EQ(std::memcmp(got->value->raw_data(), want[r]->raw_data(), want[r]->TotalBytes()), 0)
          << "tensor " << k << " on rank " << r;
    }
  }
}

// A flush past the ring's threshold takes the ring; for 2 ranks (addition
// of two values commutes) it is still bit-identical to unfused reduction.
TEST_F(CycleFusionTest, AFlushLargeEnoughForTheRingMatchesUnfusedForTwoRanks) {
  constexpr int kRanks = 2;
  Start(kRanks);
  const std::vector<int64_t> sizes = {10000, 20000, 3};  // 120 KiB fused
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<std::vector<Tensor>> inputs(kRanks);
  std::vector<std::vector<ResultPtr>> fused(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      Tensor t(DT_FLOAT, TensorShape({sizes[k]}));
      for (auto& v : t.flat<float>()) v = dist(gen);
      inputs[r].push_back(t);
      fused[r].push_back(Submit(ranks_->executors[r].get(),
                                Grad(kRanks, static_cast<int64_t>(k) + 1, 0, static_cast<int64_t>(sizes.size())), t));
    }
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<Tensor> in = {inputs[0][k], inputs[1][k]};
    auto want = ranks_->Run(Grad(kRanks, 100 + static_cast<int64_t>(k), 0, 0, 0), in);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(fused[r][k]->done.WaitForNotificationWithTimeout(kHang));
      ASSERT_TRUE(fused[r][k]->value.ok()) << fused[r][k]->value.status();
      ASSERT_TRUE(want[r].ok()) << want[r].status();
      EXPECT_EQ(std::memcmp(fused[r][k]->value->raw_data(), want[r]->raw_data(), want[r]->TotalBytes()), 0)
          << "tensor " << k << " on rank " << r;
    }
  }
}

// A tensor waiting for a plan that never comes (rank 0 never runs the op)
// fails after its op's timeout_seconds instead of waiting forever.
TEST_F(CycleFusionTest, ATensorWaitingForAPlanTimesOut) {
  Start(2);
  CollectiveParams p = Grad(2, 1);
  p.timeout_seconds = 0.2;
  ResultPtr waiting = Submit(ranks_->executors[1].get(), p, Values(3, 1, 1));
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(waiting->value.status().code(), absl::StatusCode::kDeadlineExceeded) << waiting->value.status();
  EXPECT_TRUE(absl::StrContains(waiting->value.status().message(), "timeout_seconds=0.2")) << waiting->value.status();
}

// A dead rank fails the fused reduction on the others, naming it; with
// rank 0 dead, a rank waiting for its plan fails naming rank 0.
TEST_F(CycleFusionTest, ADeadRankFailsTheFusedReductionNamingIt) {
  constexpr int kRanks = 3;
  Start(kRanks);
  ranks_->hub.KillRank(2);
  std::vector<ResultPtr> out;
  for (int r = 0; r < 2; ++r) out.push_back(Submit(ranks_->executors[r].get(), Grad(kRanks, 1, 0, 1), Values(3, r, 1)));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[r]->done.WaitForNotificationWithTimeout(kHang));
    ASSERT_FALSE(out[r]->value.ok());
    EXPECT_TRUE(absl::StrContains(out[r]->value.status().message(), "rank 2 is gone")) << out[r]->value.status();
    EXPECT_TRUE(absl::StrContains(out[r]->value.status().message(), "grad_1")) << out[r]->value.status();
  }

  Start(kRanks);
  ranks_->hub.KillRank(0);
  ResultPtr waiting = Submit(ranks_->executors[1].get(), Grad(kRanks, 1), Values(3, 1, 1));
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(kHang));
  ASSERT_FALSE(waiting->value.ok());
  EXPECT_TRUE(absl::StrContains(waiting->value.status().message(), "rank 0 is gone")) << waiting->value.status();
  EXPECT_TRUE(absl::StrContains(waiting->value.status().message(), "plan")) << waiting->value.status();
}

// The step's cancellation ends a tensor's wait in the buffer.
TEST_F(CycleFusionTest, CancellingTheStepEndsTheWait) {
  Start(2);
  CancellationManager cm;
  ResultPtr waiting = Submit(ranks_->executors[1].get(), Grad(2, 1), Values(3, 1, 1), &cm);
  cm.StartCancel(absl::UnavailableError("rank 7 is gone, say"));
  ASSERT_TRUE(waiting->done.WaitForNotificationWithTimeout(kHang));
  // It fails with the step's first error, the reason of the cancellation.
  EXPECT_EQ(waiting->value.status().code(), absl::StatusCode::kUnavailable) << waiting->value.status();
  EXPECT_TRUE(absl::StrContains(waiting->value.status().message(), "rank 7 is gone, say")) << waiting->value.status();
}

TEST(FusionPlan, RoundTripsAndRejectsMalformedPlans) {
  const std::vector<PlannedTensor> plan = {{7, 12}, {-3, 0}};
  absl::StatusOr<std::vector<PlannedTensor>> back = DecodePlan(EncodePlan(plan));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].instance_key, 7);
  EXPECT_EQ((*back)[0].elements, 12);
  EXPECT_EQ((*back)[1].instance_key, -3);
  for (const Tensor& bad : {Tensor(DT_FLOAT, TensorShape({2})), Tensor(DT_INT64, TensorShape({3})),
                            Tensor(DT_INT64, TensorShape({0})), Tensor(DT_INT64, TensorShape({1, 2}))}) {
    EXPECT_EQ(DecodePlan(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad.shape().DebugString();
  }
  Tensor negative = EncodePlan({{1, -5}});
  EXPECT_EQ(DecodePlan(negative).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FusionPlan, OnlyElementWiseReductionsWithACycleAreFused) {
  EXPECT_TRUE(UsesCycleFusion(Grad(2, 1)));
  EXPECT_FALSE(UsesCycleFusion(Grad(2, 1, 0, 0, 0)));
  EXPECT_FALSE(UsesCycleFusion(Grad(1, 1)));
  CollectiveParams adasum = Grad(2, 1);
  adasum.merge_op = MergeOp::kAdasum;
  EXPECT_FALSE(UsesCycleFusion(adasum));
  EXPECT_LT(FusionInstanceKey(Grad(2, 1)), 0);
  EXPECT_EQ(FusionInstanceKey(Grad(2, 1)), FusionInstanceKey(Grad(2, 9))) << "one stream for every instance";
  EXPECT_NE(FusionInstanceKey(Grad(2, 1)), FusionInstanceKey(Grad(2, 1, 64)));
}

}  // namespace
}  // namespace distflow
