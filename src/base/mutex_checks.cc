#include "base/mutex_checks.h"

#include <cstdlib>
#include <string_view>

namespace distflow {

absl::OnDeadlockCycle MutexDeadlockDetectionFor(const char* env_value) {
  if (env_value == nullptr) return absl::OnDeadlockCycle::kIgnore;
  const std::string_view v(env_value);
  if (v == "1" || v == "abort") return absl::OnDeadlockCycle::kAbort;
  if (v == "report") return absl::OnDeadlockCycle::kReport;
  return absl::OnDeadlockCycle::kIgnore;
}

absl::OnDeadlockCycle ConfigureMutexDeadlockDetection() {
  const absl::OnDeadlockCycle mode = MutexDeadlockDetectionFor(std::getenv("DISTFLOW_MUTEX_DEADLOCK_DETECTION"));
  absl::SetMutexDeadlockDetectionMode(mode);
  return mode;
}

}  // namespace distflow
