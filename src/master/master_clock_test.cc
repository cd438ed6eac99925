// The master's stalled-step log and step times read its WorkerCache's clock:
// under a FakeClockEnv they follow the fake time exactly, so the test asserts
// what is logged and when, without sleeping.
//
// Nothing here waits on the fake clock. The session's discovery of the
// cluster (MasterSession::Init) measures its deadline on the cache's clock
// but paces its rounds in real time, so if a task missed its GetStatus the
// wait would go on until the fake clock is moved; the test bounds it in real
// time and moves the clock past the deadline to end it instead of hanging.
// The clock is moved only once the step's partition runs on worker 1, that
// is after the master recorded the step's start, so "how long it has run" is
// exactly the time the test added.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/fake_clock_env.h"
#include "gtest/gtest.h"
#include "master/master_test_fixture.h"

namespace distflow::master_test {
namespace {

TEST_F(MasterTest, TheStalledStepLogAndStepTimesFollowTheWorkerCachesClock) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJobs(jobs_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  FakeClockEnv clock;
  WorkerCache cache(*spec, "", &clock);
  Master master(kWorker0, &cache, WorkerOf(kWorker0));
  const absl::Time t0 = absl::FromUnixMicros(clock.NowMicros());

  proto::GraphDef g;
  AddBarrier(&g, "hold", Cpu(kWorker1));  // never released: holds until cancelled
  absl::StatusOr<std::string> handle = absl::UnknownError("CreateSession did not return");
  absl::Notification created;
  std::thread creator([&] {
    handle = CreateSession(&master, g);
    created.Notify();
  });
  if (!created.WaitForNotificationWithTimeout(kBound)) {
    ADD_FAILURE() << "CreateSession still waits for the cluster after " << kBound;
    clock.Advance(absl::Hours(24));  // past its deadline: the next round gives up
  }
  creator.join();
  ASSERT_TRUE(handle.ok()) << handle.status();

  proto::RunStepRequest req = Request(*handle, {"hold"});
  Feed(&req, "hold_at", Tensor::Scalar<int64_t>(0));
  std::shared_ptr<StepCall> call = StartStep(&master, req);
  ASSERT_TRUE(
      WaitUntil([&] { return WorkerOf(kWorker1)->running_partitions() > 0 || call->done.HasBeenNotified(); }, kBound));
  ASSERT_FALSE(call->done.HasBeenNotified()) << call->status;
  ASSERT_GT(WorkerOf(kWorker1)->running_partitions(), 0) << "the held step never reached worker 1";

  const std::string stalled = absl::StrCat(" of session ", *handle, " has been running for ");
  auto log_stalled = [&] {
    testing::internal::CaptureStderr();
    master.LogStalledSteps(absl::Minutes(1));
    return testing::internal::GetCapturedStderr();
  };
  // Under a minute on the cache's clock (however long it really took): not stalled yet.
  clock.Advance(absl::Seconds(59));
  std::string logged = log_stalled();
  EXPECT_FALSE(absl::StrContains(logged, stalled)) << logged;
  // 90 s: logged, with the time on the fake clock and the task it waits for.
  clock.Advance(absl::Seconds(31));
  logged = log_stalled();
  EXPECT_TRUE(absl::StrContains(logged, absl::StrCat(stalled, "1m30s; waiting for the partitions on ", kWorker1)))
      << logged;
  // Logged at most once a minute.
  clock.Advance(absl::Seconds(59));
  logged = log_stalled();
  EXPECT_FALSE(absl::StrContains(logged, stalled)) << logged;
  clock.Advance(absl::Seconds(1));
  logged = log_stalled();
  EXPECT_TRUE(absl::StrContains(logged, absl::StrCat(stalled, "2m30s"))) << logged;

  // The step's time, as the status page shows it, is on the same clock.
  EXPECT_TRUE(master.CloseSession(*handle).ok());
  ASSERT_TRUE(Answered(*call));
  EXPECT_EQ(call->status.code(), absl::StatusCode::kCancelled) << call->status;
  std::vector<Master::StepRecord> steps = master.RecentSteps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].seconds, 150.0);
  EXPECT_EQ(steps[0].end, t0 + absl::Seconds(150));
}

}  // namespace
}  // namespace distflow::master_test
