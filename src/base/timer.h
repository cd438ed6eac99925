// Timer: runs closures after a delay, on one process-wide background thread.
//
// Used for deadlines of work that does not park a thread (an asynchronous
// step): the closure should be short (it runs on the shared timer thread) and
// must not call Cancel on its own id. Thread-safe.
//
// Its clock is an Env's NowMicros (base/env.h), so a test can give a timer a
// fake clock, advance it, and Poke() the timer to run what is then due,
// instead of sleeping (base/fake_clock_env.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace distflow {

class Env;

class Timer {
 public:
  using Id = uint64_t;

  // The process-wide timer (its thread starts on first use, never stops).
  static Timer* Global();

  // Reads the time from `clock` (null: the real clock), which must outlive
  // the timer.
  explicit Timer(Env* clock = nullptr);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `fn` once `delay` has passed. Returns an id for Cancel (never 0).
  Id After(absl::Duration delay, std::function<void()> fn);
  // True if `fn` had not started and now never will; false if it has
  // started (it may still be running) or the id is unknown.
  bool Cancel(Id id);
  // Makes the timer look at its clock again now (after a fake clock moved).
  void Poke();
  size_t NumPendingForTest();
  // How often its thread has woken from a wait: a closure's time came, an
  // earlier deadline was added, a Poke, the first closure of an empty queue.
  uint64_t WakeUpsForTest();
  // True while its thread waits and nothing has given it a reason to wake:
  // every wake-up asked for so far has been counted.
  bool IdleForTest();

 private:
  void Loop();
  absl::Time Now() const;
  // Whether the thread, waiting until `sleep_until_`, should wake before.
  bool ShouldWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::pair<absl::Time, Id>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<Id, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t pokes_ ABSL_GUARDED_BY(mu_) = 0;
  // The thread's wait: whether it waits, until when (InfiniteFuture: the
  // queue was empty), the Pokes it had seen, and how often it woke.
  bool asleep_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time sleep_until_ ABSL_GUARDED_BY(mu_);
  uint64_t sleep_pokes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  Env* const clock_;
  std::thread thread_;
};

}  // namespace distflow
