#include "base/timer.h"

#include "absl/time/clock.h"

namespace distflow {

Timer* Timer::Global() {
  static Timer* timer = new Timer;  // never destroyed: closures may be scheduled during exit
  return timer;
}

Timer::Timer() : thread_([this] { Loop(); }) {}

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
  absl::Time at = absl::Now() + delay;
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

void Timer::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (stopping_) return;
    if (queue_.empty()) {
      auto wake = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&wake));
      continue;
    }
    auto it = queue_.begin();
    if (absl::Now() < it->first.first) {
      // Wakes early when an earlier deadline is added, or on stop.
      const Id head = it->first.second;
      auto changed = [this, head]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || queue_.empty() || queue_.begin()->first.second != head;
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), it->first.first);
      continue;
    }
    std::function<void()> fn = std::move(it->second);
    when_.erase(it->first.second);
    queue_.erase(it);
    mu_.Unlock();
    fn();
    fn = nullptr;
    mu_.Lock();
  }
}

}  // namespace distflow
