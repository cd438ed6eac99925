// Abseil's mutex deadlock detection, chosen once per process.
//
// Debian's abseil is built with the detector on (it aborts on a lock-order
// cycle): every Lock of a mutex then records the locks already held in a
// global graph (GraphCycles), about 1% of a parameter server's CPU. A
// server turns it off when it starts, unless DISTFLOW_MUTEX_DEADLOCK_DETECTION
// asks for it ("abort" or "1": abseil's abort; "report": log the cycle and
// go on). Thread-safe; the mode is process-wide.
#pragma once

#include "absl/synchronization/mutex.h"

namespace distflow {

// The mode `env_value` (DISTFLOW_MUTEX_DEADLOCK_DETECTION's value, nullptr
// if unset) asks for: kIgnore unless it is "1", "abort" or "report".
absl::OnDeadlockCycle MutexDeadlockDetectionFor(const char* env_value);

// Sets abseil's mode from DISTFLOW_MUTEX_DEADLOCK_DETECTION; returns it.
absl::OnDeadlockCycle ConfigureMutexDeadlockDetection();

}  // namespace distflow
