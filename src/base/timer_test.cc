#include "base/timer.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(Timer, RunsClosuresInDeadlineOrder) {
  Timer timer;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification last;
  timer.After(absl::Milliseconds(60), [&] {
    absl::MutexLock l(&mu);
    order.push_back(3);
    last.Notify();
  });
  timer.After(absl::Milliseconds(20), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
  });
  timer.After(absl::ZeroDuration(), [&] {
    absl::MutexLock l(&mu);
    order.push_back(1);
  });
  absl::Time start = absl::Now();
  last.WaitForNotification();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(Timer, CancelledClosureNeverRuns) {
  Timer timer;
  std::atomic<int> ran{0};
  Timer::Id id = timer.After(absl::Milliseconds(30), [&] { ran.fetch_add(1); });
  EXPECT_TRUE(timer.Cancel(id));
  EXPECT_FALSE(timer.Cancel(id));  // already gone
  EXPECT_EQ(timer.NumPendingForTest(), 0u);
  absl::Notification later;
  timer.After(absl::Milliseconds(60), [&] { later.Notify(); });
  later.WaitForNotification();
  EXPECT_EQ(ran.load(), 0);
}

TEST(Timer, CancelAfterRunReturnsFalse) {
  Timer timer;
  absl::Notification ran;
  Timer::Id id = timer.After(absl::ZeroDuration(), [&] { ran.Notify(); });
  ran.WaitForNotification();
  EXPECT_FALSE(timer.Cancel(id));
}

TEST(Timer, DestructorDropsPendingClosures) {
  std::atomic<int> ran{0};
  {
    Timer timer;
    timer.After(absl::Seconds(30), [&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 0);
}

TEST(Timer, OnAFakeClockNothingRunsUntilTheClockReachesItsTime) {
  FakeClockEnv clock;
  Timer timer(&clock);
  absl::Notification ran;
  timer.After(absl::Hours(1), [&] { ran.Notify(); });
  clock.Advance(absl::Minutes(59));
  timer.Poke();
  // The timer looked at the clock and found nothing due: the closure waits.
  EXPECT_FALSE(ran.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_EQ(timer.NumPendingForTest(), 1u);
  clock.Advance(absl::Minutes(1));
  timer.Poke();
  ran.WaitForNotification();  // an hour of fake time, no hour of waiting
  EXPECT_EQ(timer.NumPendingForTest(), 0u);
}

}  // namespace
}  // namespace distflow
