// For tests: an Env whose clock moves only when told to, so that timeouts,
// expiry and retries are tested by advancing time instead of sleeping.
// A sleep on it returns at once, having moved the clock by its length (and
// is remembered, so a test can check a backoff schedule). Everything but the
// clock is the real Env's. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/env.h"

namespace distflow {

class FakeClockEnv : public EnvWrapper {
 public:
  FakeClockEnv() : EnvWrapper(Env::Default()) {}
  int64_t NowMicros() override { return now_us_.load(); }
  void SleepForMicros(int64_t micros) override {
    {
      absl::MutexLock lock(&mu_);
      sleeps_.push_back(absl::Microseconds(micros));
    }
    if (micros > 0) now_us_ += micros;
  }
  void Advance(absl::Duration d) { now_us_ += absl::ToInt64Microseconds(d); }
  // Every sleep so far, in order.
  std::vector<absl::Duration> Sleeps() {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }

 private:
  std::atomic<int64_t> now_us_{1'000'000'000};
  absl::Mutex mu_;
  std::vector<absl::Duration> sleeps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
