#include "base/timer.h"

#include <pthread.h>

#include "absl/time/clock.h"
#include "base/env.h"

namespace distflow {

Timer* Timer::Global() {
  static Timer* timer = new Timer;  // never destroyed: closures may be scheduled during exit
  return timer;
}

Timer::Timer(Env* clock) : clock_(clock), thread_([this] { Loop(); }) {
  pthread_setname_np(thread_.native_handle(), "df_timer");  // named before the constructor returns
}

absl::Time Timer::Now() const { return clock_ == nullptr ? absl::Now() : absl::FromUnixMicros(clock_->NowMicros()); }

void Timer::Poke() {
  absl::MutexLock lock(&mu_);
  ++pokes_;
}

Timer::~Timer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

Timer::Id Timer::After(absl::Duration delay, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  Id id = next_id_++;
  absl::Time at = Now() + delay;
  queue_.emplace(std::make_pair(at, id), std::move(fn));
  when_[id] = at;
  return id;
}

bool Timer::Cancel(Id id) {
  std::function<void()> drop;  // destroyed outside the lock: it may own state with destructor work
  {
    absl::MutexLock lock(&mu_);
    auto it = when_.find(id);
    if (it == when_.end()) return false;
    auto q = queue_.find(std::make_pair(it->second, id));
    drop = std::move(q->second);
    queue_.erase(q);
    when_.erase(it);
  }
  return true;
}

size_t Timer::NumPendingForTest() {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

uint64_t Timer::WakeUpsForTest() {
  absl::MutexLock lock(&mu_);
  return wakeups_;
}

bool Timer::IdleForTest() {
  absl::MutexLock lock(&mu_);
  return asleep_ && !ShouldWake();
}

// Wakes early only when an earlier deadline is added (the first one, when
// the queue was empty), on a Poke, or on stop. Not when the head is
// cancelled or the queue empties: then the wait ends at the old head's time
// and finds nothing due, which costs one wake-up per deadline instead of two
// per After/Cancel pair (bulk offers come and go every step; each early
// wake-up was a context switch and a futex wake on the caller's thread).
bool Timer::ShouldWake() const {
  return stopping_ || pokes_ != sleep_pokes_ || (!queue_.empty() && queue_.begin()->first.first < sleep_until_);
}

void Timer::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (stopping_) return;
    absl::Duration left = absl::InfiniteDuration();
    if (!queue_.empty()) {
      auto it = queue_.begin();
      left = it->first.first - Now();
      if (left <= absl::ZeroDuration()) {
        std::function<void()> fn = std::move(it->second);
        when_.erase(it->first.second);
        queue_.erase(it);
        mu_.Unlock();
        fn();
        fn = nullptr;
        mu_.Lock();
        continue;
      }
    }
    // (A timeout, not a deadline: the clock may be a fake one.)
    asleep_ = true;
    sleep_until_ = queue_.empty() ? absl::InfiniteFuture() : queue_.begin()->first.first;
    sleep_pokes_ = pokes_;
    auto wake = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ShouldWake(); };
    mu_.AwaitWithTimeout(absl::Condition(&wake), left);
    asleep_ = false;
    ++wakeups_;
  }
}

}  // namespace distflow
