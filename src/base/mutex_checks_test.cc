#include "base/mutex_checks.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Takes two fresh mutexes in one order, then the other: a lock-order cycle
// the detector reports (or aborts on) when it is on. Returns stderr.
std::string LockInBothOrders() {
  testing::internal::CaptureStderr();
  absl::Mutex a, b;
  a.Lock();
  b.Lock();
  b.Unlock();
  a.Unlock();
  b.Lock();
  a.Lock();
  a.Unlock();
  b.Unlock();
  return testing::internal::GetCapturedStderr();
}

TEST(MutexDeadlockDetection, OffUnlessTheEnvironmentAsks) {
  EXPECT_EQ(MutexDeadlockDetectionFor(nullptr), absl::OnDeadlockCycle::kIgnore);
  EXPECT_EQ(MutexDeadlockDetectionFor(""), absl::OnDeadlockCycle::kIgnore);
  EXPECT_EQ(MutexDeadlockDetectionFor("0"), absl::OnDeadlockCycle::kIgnore);
  EXPECT_EQ(MutexDeadlockDetectionFor("1"), absl::OnDeadlockCycle::kAbort);
  EXPECT_EQ(MutexDeadlockDetectionFor("abort"), absl::OnDeadlockCycle::kAbort);
  EXPECT_EQ(MutexDeadlockDetectionFor("report"), absl::OnDeadlockCycle::kReport);
}

TEST(MutexDeadlockDetection, ConfigureSetsAbseilsMode) {
  ASSERT_EQ(setenv("DISTFLOW_MUTEX_DEADLOCK_DETECTION", "report", 1), 0);
  EXPECT_EQ(ConfigureMutexDeadlockDetection(), absl::OnDeadlockCycle::kReport);
  EXPECT_THAT(LockInBothOrders(), HasSubstr("deadlock"));

  ASSERT_EQ(unsetenv("DISTFLOW_MUTEX_DEADLOCK_DETECTION"), 0);
  EXPECT_EQ(ConfigureMutexDeadlockDetection(), absl::OnDeadlockCycle::kIgnore);
  EXPECT_THAT(LockInBothOrders(), Not(HasSubstr("deadlock")));
}

}  // namespace
}  // namespace distflow
