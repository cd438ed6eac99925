// Horovod's stall check: with a short interval, a rank that joins a
// collective late is named by the ranks waiting for it, again every
// interval, and the run still succeeds once it joins; the interval's
// environment variables.
#include "collective/stall_check.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/timer.h"
#include "base/wait_until.h"
#include "collective/collective_test_util.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// Each rank's stall reports. The reporters share the state, so a report
// still on its way as a test ends writes into live memory.
class Reports {
 public:
  explicit Reports(int n) : state_(std::make_shared<State>()) {
    absl::MutexLock lock(&state_->mu);
    state_->reports.resize(static_cast<size_t>(n));
  }
  StallCheckOptions For(int rank, absl::Duration interval) {
    StallCheckOptions o;
    o.interval = interval;
    o.report = [state = state_, rank](const std::string& message) {
      absl::MutexLock lock(&state->mu);
      state->reports[static_cast<size_t>(rank)].push_back(message);
    };
    return o;
  }
  std::vector<std::string> Of(int rank) {
    absl::MutexLock lock(&state_->mu);
    return state_->reports[static_cast<size_t>(rank)];
  }

 private:
  struct State {
    absl::Mutex mu;
    std::vector<std::vector<std::string>> reports ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

CollectiveParams Reduce(int n) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "grad_bucket_0";
  p.group_size = n;
  p.group_key = 4;
  p.instance_key = 11;
  p.merge_op = MergeOp::kAdd;
  p.final_op = FinalOp::kId;
  p.dtype = DT_FLOAT;
  return p;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Rank 2 joins late; ranks 0 and 1 have entered the reduction. For the
// direct exchange (4 floats) both name rank 2 as not joined; for the ring
// (100000 floats) rank 0, after rank 2 in the ring, names it, and rank 1
// names rank 0 as joined but waiting. Reports repeat, and the reduction
// still gives the right sum once rank 2 joins.
TEST(StallCheck, NamesTheRankThatHasNotJoined) {
  for (int64_t count : {int64_t{4}, int64_t{100000}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    Reports reports(3);
    Ranks ranks(3, [&](int r) { return reports.For(r, absl::Milliseconds(20)); });
    const CollectiveParams p = Reduce(3);
    std::vector<Tensor> inputs;
    for (int r = 0; r < 3; ++r) {
      Tensor t(DT_FLOAT, TensorShape({count}));
      for (int64_t i = 0; i < count; ++i) t.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(r + 1);
      inputs.push_back(t);
    }
    std::vector<absl::StatusOr<Tensor>> out(3, absl::UnknownError("did not run"));
    std::vector<std::unique_ptr<absl::Notification>> done;
    for (int r = 0; r < 3; ++r) done.push_back(std::make_unique<absl::Notification>());
    auto start = [&](int r) {
      ranks.executors[static_cast<size_t>(r)]->Run(p, inputs[static_cast<size_t>(r)], nullptr,
                                                   [&, r](absl::StatusOr<Tensor> t) {
                                                     out[static_cast<size_t>(r)] = std::move(t);
                                                     done[static_cast<size_t>(r)]->Notify();
                                                   });
    };
    start(0);
    start(1);
    ASSERT_TRUE(WaitUntil([&] { return reports.Of(0).size() >= 2 && reports.Of(1).size() >= 2; }, kHang));
    const std::string r0 = reports.Of(0)[1], r1 = reports.Of(1)[1];
    for (const std::string& r : {r0, r1}) {
      EXPECT_TRUE(Has(r, "Stall check: CollectiveReduce 'grad_bucket_0' (group 4 of 3, instance 11), run 0")) << r;
      EXPECT_TRUE(Has(r, "HOROVOD_STALL_CHECK_TIME_SECONDS")) << r;
    }
    EXPECT_TRUE(Has(r0, "on rank 0 (in-process)")) << r0;
    EXPECT_TRUE(Has(r0, "Not joined yet: rank 2 (in-process).")) << r0;
    if (count == 4) {
      EXPECT_TRUE(Has(r1, "Not joined yet: rank 2 (in-process).")) << r1;
    } else {
      EXPECT_TRUE(Has(r1, "Joined, but not yet sent the next part (waiting on another rank?): rank 0 (in-process)."))
          << r1;
    }
    EXPECT_TRUE(reports.Of(2).empty());
    start(2);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(done[static_cast<size_t>(r)]->WaitForNotificationWithTimeout(kHang));
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      EXPECT_EQ(out[static_cast<size_t>(r)]->flat<float>()[0], 6.0f);
      EXPECT_EQ(out[static_cast<size_t>(r)]->flat<float>()[static_cast<size_t>(count - 1)], 6.0f);
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

// A run that has ended leaves no stall timer behind, so it is never
// reported again.
TEST(StallCheck, StopsWhenTheRunEnds) {
  Reports reports(2);
  Ranks ranks(2, [&](int r) { return reports.For(r, absl::Milliseconds(10)); });
  std::vector<Tensor> inputs = {Tensor::FromVector<float>({1}), Tensor::FromVector<float>({2})};
  absl::Notification done0;
  ranks.executors[0]->Run(Reduce(2), inputs[0], nullptr, [&](absl::StatusOr<Tensor> t) {
    EXPECT_TRUE(t.ok()) << t.status();
    done0.Notify();
  });
  ASSERT_TRUE(WaitUntil([&] { return reports.Of(0).size() >= 2; }, kHang));
  EXPECT_TRUE(Has(reports.Of(0)[0], "Not joined yet: rank 1 (in-process).")) << reports.Of(0)[0];
  auto out = ranks.Run(Reduce(2), inputs, {1});
  ASSERT_TRUE(out[1].ok()) << out[1].status();
  ASSERT_TRUE(done0.WaitForNotificationWithTimeout(kHang));
  // (A check already running as the run ended may add one last report.)
  EXPECT_TRUE(WaitUntil([] { return Timer::Global()->NumPendingForTest() == 0; }, kHang));
}

// Zero turns the check off: a run waits silently.
TEST(StallCheck, ZeroTurnsItOff) {
  Reports reports(2);
  Ranks ranks(2, [&](int r) { return reports.For(r, absl::ZeroDuration()); });
  CollectiveParams p = Reduce(2);
  p.timeout_seconds = 0.1;  // ends the lonely run
  auto out = ranks.Run(p, {Tensor::FromVector<float>({1}), Tensor::FromVector<float>({2})}, {0});
  ASSERT_TRUE(absl::IsDeadlineExceeded(out[0].status())) << out[0].status();
  EXPECT_TRUE(reports.Of(0).empty());
}

TEST(StallCheck, IntervalFromTheEnvironment) {
  unsetenv("DISTFLOW_STALL_CHECK_SECS");
  unsetenv("HOROVOD_STALL_CHECK_TIME_SECONDS");
  unsetenv("HOROVOD_STALL_CHECK_DISABLE");
  EXPECT_EQ(*StallCheckIntervalFromEnv(), absl::Seconds(60));
  setenv("HOROVOD_STALL_CHECK_TIME_SECONDS", "5", 1);
  EXPECT_EQ(*StallCheckIntervalFromEnv(), absl::Seconds(5));
  setenv("DISTFLOW_STALL_CHECK_SECS", "0.5", 1);  // distflow's own wins
  EXPECT_EQ(*StallCheckIntervalFromEnv(), absl::Milliseconds(500));
  setenv("DISTFLOW_STALL_CHECK_SECS", "0", 1);
  EXPECT_EQ(*StallCheckIntervalFromEnv(), absl::ZeroDuration());
  setenv("DISTFLOW_STALL_CHECK_SECS", "soon", 1);
  absl::StatusOr<absl::Duration> bad = StallCheckIntervalFromEnv();
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(std::string(bad.status().message()), "DISTFLOW_STALL_CHECK_SECS is 'soon'")) << bad.status();
  setenv("DISTFLOW_STALL_CHECK_SECS", "-1", 1);
  EXPECT_FALSE(StallCheckIntervalFromEnv().ok());
  unsetenv("DISTFLOW_STALL_CHECK_SECS");
  setenv("HOROVOD_STALL_CHECK_DISABLE", "1", 1);
  EXPECT_EQ(*StallCheckIntervalFromEnv(), absl::ZeroDuration());
  unsetenv("HOROVOD_STALL_CHECK_DISABLE");
  unsetenv("HOROVOD_STALL_CHECK_TIME_SECONDS");
}

}  // namespace
}  // namespace distflow
