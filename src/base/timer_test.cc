#include "base/timer.h"

#include <dirent.h>

#include <atomic>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "base/wait_until.h"
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

// Thread ids of this process's timer threads.
std::set<std::string> TimerThreads() {
  std::set<std::string> tids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      std::ifstream comm(absl::StrCat("/proc/self/task/", e->d_name, "/comm"));
      std::string name;
      if (std::getline(comm, name) && name == "df_timer") tids.insert(e->d_name);
    }
    closedir(d);
  }
  return tids;
}

TEST(Timer, ItsThreadIsNamedDfTimer) {
  const std::set<std::string> before = TimerThreads();
  Timer timer;
  EXPECT_EQ(TimerThreads().size(), before.size() + 1) << "the timer's thread is named df_timer";
}

// Bulk offers in a step: closures added with a long time to live and taken
// (cancelled) soon after, the first one the queue's head. On a fake clock
// that stands still, every later closure's time equals the first's: none is
// earlier, so none may wake the thread, nor may the head's cancellation.
TEST(Timer, ClosuresAddedAndCancelledBeforeTheirTimeDoNotWakeItsThread) {
  FakeClockEnv clock;
  Timer timer(&clock);
  std::atomic<int> ran{0};
  const Timer::Id head = timer.After(absl::Minutes(30), [&] { ran++; });
  // The thread sleeps until the head's time (woken, if it waited on an
  // empty queue, by the head's arrival).
  ASSERT_TRUE(WaitUntil([&] { return timer.IdleForTest(); }, absl::Seconds(60)));
  const uint64_t wakeups = timer.WakeUpsForTest();
  ASSERT_TRUE(timer.Cancel(head));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(timer.Cancel(timer.After(absl::Minutes(30), [&] { ran++; })));
  // Idle again: any wake-up they caused has been taken and counted.
  ASSERT_TRUE(WaitUntil([&] { return timer.IdleForTest(); }, absl::Seconds(60)));
  EXPECT_EQ(timer.WakeUpsForTest(), wakeups) << "201 closures added and cancelled woke the timer's thread";
  EXPECT_EQ(ran.load(), 0);
  // An earlier deadline still wakes it at once.
  absl::Notification soon;
  timer.After(absl::ZeroDuration(), [&] { soon.Notify(); });
  EXPECT_TRUE(soon.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_GT(timer.WakeUpsForTest(), wakeups);
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
