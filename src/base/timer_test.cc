#include "base/timer.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
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

}  // namespace
}  // namespace distflow
