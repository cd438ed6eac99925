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

// The first `n` inputs for a reduction of `count` floats: rank r holds r + 1.
std::vector<Tensor> Inputs(int n, int64_t count) {
  std::vector<Tensor> inputs;
  for (int r = 0; r < n; ++r) {
    Tensor t(DT_FLOAT, TensorShape({count}));
    for (int64_t i = 0; i < count; ++i) t.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(r + 1);
    inputs.push_back(t);
  }
  return inputs;
}

// Runs of one reduction started rank by rank, each ending into its slot.
struct Started {
  explicit Started(int n) : out(static_cast<size_t>(n), absl::UnknownError("did not run")) {
    for (int r = 0; r < n; ++r) done.push_back(std::make_unique<absl::Notification>());
  }
  void Start(Ranks& ranks, const CollectiveParams& p, const Tensor& input, int r) {
    ranks.executors[static_cast<size_t>(r)]->Run(p, input, nullptr, [this, r](absl::StatusOr<Tensor> t) {
      out[static_cast<size_t>(r)] = std::move(t);
      done[static_cast<size_t>(r)]->Notify();
    });
  }
  // Every rank ends with `sum` in its first and last element.
  void ExpectSum(float sum, int64_t count) {
    for (size_t r = 0; r < out.size(); ++r) {
      ASSERT_TRUE(done[r]->WaitForNotificationWithTimeout(kHang));
      ASSERT_TRUE(out[r].ok()) << out[r].status();
      EXPECT_EQ(out[r]->flat<float>()[0], sum);
      EXPECT_EQ(out[r]->flat<float>()[static_cast<size_t>(count - 1)], sum);
    }
  }
  std::vector<absl::StatusOr<Tensor>> out;
  std::vector<std::unique_ptr<absl::Notification>> done;
};

// Waits until rank `rank` has reported at least twice and its latest report
// names the ranks not joined as `absent` and those joined but waiting as
// `behind` ("" for none). The report depends on which messages have arrived
// by then, so the test waits for the state instead of for a time; a report
// that never comes fails after kHang. Returns the report.
std::string WaitForReport(Reports& reports, int rank, const std::string& absent, const std::string& behind) {
  std::string last;
  const bool got = WaitUntil(
      [&] {
        std::vector<std::string> mine = reports.Of(rank);
        if (mine.size() < 2) return false;
        last = mine.back();
        const bool absent_ok =
            absent.empty() ? !Has(last, "Not joined yet:") : Has(last, absl::StrCat("Not joined yet: ", absent, "."));
        const bool behind_ok =
            behind.empty()
                ? !Has(last, "Joined, but")
                : Has(last,
                      absl::StrCat("Joined, but not yet sent the next part (waiting on another rank?): ", behind, "."));
        return absent_ok && behind_ok;
      },
      kHang);
  EXPECT_TRUE(got) << "rank " << rank << " never reported not joined: '" << absent << "', joined but waiting: '"
                   << behind << "'; its last report: " << last;
  return last;
}

// Rank 2 joins late; ranks 0 and 1 have entered the reduction. For the
// direct exchange (4 floats) both name rank 2 as not joined; for the ring
// (100000 floats) the ranks announce the run, so both name rank 2 too, and
// rank 1 also names rank 0, the neighbour it waits on, as joined but
// waiting. Reports repeat, and the reduction still gives the right sum once
// rank 2 joins.
TEST(StallCheck, NamesTheRankThatHasNotJoined) {
  for (int64_t count : {int64_t{4}, int64_t{100000}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    Reports reports(3);
    Ranks ranks(3, [&](int r) { return reports.For(r, absl::Milliseconds(20)); });
    const CollectiveParams p = Reduce(3);
    const std::vector<Tensor> inputs = Inputs(3, count);
    Started started(3);
    started.Start(ranks, p, inputs[0], 0);
    started.Start(ranks, p, inputs[1], 1);
    const std::string r0 = WaitForReport(reports, 0, "rank 2 (in-process)", "");
    const std::string r1 = WaitForReport(reports, 1, "rank 2 (in-process)", count == 4 ? "" : "rank 0 (in-process)");
    for (const std::string& r : {r0, r1}) {
      EXPECT_TRUE(Has(r, "Stall check: CollectiveReduce 'grad_bucket_0' (group 4 of 3, instance 11), run 0")) << r;
      EXPECT_TRUE(Has(r, "HOROVOD_STALL_CHECK_TIME_SECONDS")) << r;
    }
    EXPECT_TRUE(Has(r0, "on rank 0 (in-process)")) << r0;
    EXPECT_TRUE(Has(r1, "on rank 1 (in-process)")) << r1;
    EXPECT_TRUE(reports.Of(2).empty());
    started.Start(ranks, p, inputs[2], 2);
    started.ExpectSum(6.0f, count);
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

// Four ranks, two of them late: every waiting rank names both, in the
// direct exchange and in the ring (where rank 0 hears of rank 2 only
// through the announcements, and rank 1 of neither).
TEST(StallCheck, NamesEveryRankThatHasNotJoined) {
  for (int64_t count : {int64_t{4}, int64_t{100000}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    Reports reports(4);
    Ranks ranks(4, [&](int r) { return reports.For(r, absl::Milliseconds(20)); });
    const CollectiveParams p = Reduce(4);
    const std::vector<Tensor> inputs = Inputs(4, count);
    Started started(4);
    started.Start(ranks, p, inputs[0], 0);
    started.Start(ranks, p, inputs[1], 1);
    const std::string late = "rank 2 (in-process), rank 3 (in-process)";
    WaitForReport(reports, 0, late, "");
    WaitForReport(reports, 1, late, count == 4 ? "" : "rank 0 (in-process)");
    started.Start(ranks, p, inputs[2], 2);
    // Rank 2 has joined: rank 3 alone is late now, for everyone.
    WaitForReport(reports, 0, "rank 3 (in-process)", "");
    WaitForReport(reports, 2, "rank 3 (in-process)", count == 4 ? "" : "rank 1 (in-process)");
    started.Start(ranks, p, inputs[3], 3);
    started.ExpectSum(10.0f, count);
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
