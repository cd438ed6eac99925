// For tests: an Env whose clock moves only when told to, so that timeouts,
// expiry and retries are tested by advancing time instead of sleeping.
// Everything but the clock is the real Env's. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "base/env.h"

namespace distflow {

class FakeClockEnv : public EnvWrapper {
 public:
  FakeClockEnv() : EnvWrapper(Env::Default()) {}
  int64_t NowMicros() override { return now_us_.load(); }
  void Advance(absl::Duration d) { now_us_ += absl::ToInt64Microseconds(d); }

 private:
  std::atomic<int64_t> now_us_{1'000'000'000};
};

}  // namespace distflow
