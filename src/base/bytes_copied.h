// distflow_bytes_copied_total{what=...}: bytes the runtime copies in user
// space on a step's path (not the kernel's socket copies), by cause, so the
// copies per step can be read from a task's /metrics
// (bench/profile_cluster.py). Thread-safe.
#pragma once

#include "base/metrics.h"

namespace distflow {

// The counter for one cause; callers keep the pointer in a function-local static.
inline Counter* BytesCopiedCounter(const char* what) {
  return Metrics::Global()->GetCounter("distflow_bytes_copied_total",
                                       "Bytes the runtime copied in user space on a step's path, by cause",
                                       {{"what", what}});
}

}  // namespace distflow
