// WaitUntil: the one way tests (and test-like probes) wait for a state that
// nothing signals. It polls `condition` until it holds or `timeout` passes,
// and says whether it held, so a test asserts on the state rather than on
// how long something took: a slow machine makes it wait longer, a fast one
// shorter, and neither makes it fail.
#pragma once

#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace distflow {

inline bool WaitUntil(absl::FunctionRef<bool()> condition, absl::Duration timeout,
                      absl::Duration poll = absl::Milliseconds(5)) {
  const absl::Time until = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= until) return condition();
    absl::SleepFor(poll);
  }
  return true;
}

}  // namespace distflow
