#include "base/cancellation.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(CancellationManager, RunsRegisteredCallbacksOnceAndRefusesLaterOnes) {
  CancellationManager cm;
  int ran = 0;
  cm.Register([&] { ++ran; });
  const CancellationManager::Token gone = cm.Register([&] { ran += 100; });
  EXPECT_TRUE(cm.Deregister(gone));
  cm.StartCancel(absl::CancelledError("first"));
  cm.StartCancel(absl::CancelledError("second"));
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(cm.IsCancelled());
  EXPECT_EQ(cm.reason().message(), "first");
  EXPECT_EQ(cm.Register([&] { ++ran; }), CancellationManager::kInvalidToken);
  EXPECT_FALSE(cm.Deregister(gone));
}

// The caller of Deregister frees what the callback uses once it returns:
// it must not return while that callback runs on StartCancel's thread.
TEST(CancellationManager, DeregisterWaitsForItsCallbackRunningOnAnotherThread) {
  CancellationManager cm;
  absl::Notification entered, gate;
  std::atomic<bool> callback_done{false};
  const CancellationManager::Token token = cm.Register([&] {
    entered.Notify();
    gate.WaitForNotification();
    callback_done = true;
  });
  std::thread canceller([&] { cm.StartCancel(absl::CancelledError("stop")); });
  entered.WaitForNotification();
  std::atomic<bool> calling{false}, returned{false};
  bool removed = true, done_when_returned = false;
  std::thread deregisterer([&] {
    calling = true;
    removed = cm.Deregister(token);
    done_when_returned = callback_done.load();
    returned = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return calling.load(); }, absl::Seconds(60)));
  // A Deregister that does not wait gets the time to return before the
  // gate opens; the order it saw is checked below, whatever the timing.
  WaitUntil([&] { return returned.load(); }, absl::Milliseconds(200));
  gate.Notify();
  deregisterer.join();
  canceller.join();
  EXPECT_FALSE(removed) << "the callback had started";
  EXPECT_TRUE(done_when_returned) << "Deregister returned while its callback was still running";
}

TEST(CancellationManager, ACallbackMayDeregisterItselfWithoutWaitingForItself) {
  CancellationManager cm;
  std::atomic<CancellationManager::Token> token{CancellationManager::kInvalidToken};
  bool removed = true;
  token = cm.Register([&] { removed = cm.Deregister(token.load()); });
  cm.StartCancel(absl::CancelledError("stop"));  // returns: no wait on itself
  EXPECT_FALSE(removed);
}

// While one callback runs, another that has not started can still be
// removed, and then never runs.
TEST(CancellationManager, DeregisterDuringCancellationRemovesACallbackThatHasNotStarted) {
  CancellationManager cm;
  absl::Notification gate;
  std::atomic<int> entered{-1};
  std::atomic<int> runs{0};
  CancellationManager::Token tokens[2];
  for (int i = 0; i < 2; ++i) {
    tokens[i] = cm.Register([&, i] {
      int none = -1;
      entered.compare_exchange_strong(none, i);
      ++runs;
      gate.WaitForNotification();
    });
  }
  std::thread canceller([&] { cm.StartCancel(absl::CancelledError("stop")); });
  ASSERT_TRUE(WaitUntil([&] { return entered.load() >= 0; }, absl::Seconds(60)));
  const int waiting = 1 - entered.load();
  EXPECT_TRUE(cm.Deregister(tokens[waiting]));
  gate.Notify();
  canceller.join();
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace distflow
