// Horovod's stall check for one task's collectives. A run that has waited
// longer than the interval for ranks of its group is reported: which ranks
// have not joined it at all (nothing received from them in this run) and
// which have joined but not yet sent the part it waits for (they wait, in
// turn, on someone else). The report repeats every interval until the run
// ends; it never fails the run (timeout_seconds and the step's deadline do
// that).
//
// A rank learns about its peers only from what it receives: in the direct
// exchange (tensors under 64 KiB, broadcasts, gathers) every rank hears
// from every other, so every waiting rank names the late one; in the ring a
// rank hears only from the rank before it, so the rank after the late one
// names it and the others name the neighbour they wait on as "joined".
//
// WatchForStalls wraps a run's channel; thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/transport.h"

namespace distflow {

struct StallCheckOptions {
  // How long a run may wait before it is reported, and how often it is
  // reported again; zero (or less) turns the check off. Horovod's default.
  absl::Duration interval = absl::Seconds(60);
  // Where reports go; null: the log, as a warning.
  std::function<void(const std::string&)> report;
};

// The interval from the environment: DISTFLOW_STALL_CHECK_SECS, else
// Horovod's HOROVOD_STALL_CHECK_TIME_SECONDS, else 60 s; 0 turns it off
// (so does Horovod's HOROVOD_STALL_CHECK_DISABLE=1). InvalidArgument naming
// the variable if its value is not a number of seconds, 0 or more.
absl::StatusOr<absl::Duration> StallCheckIntervalFromEnv();

struct WatchedChannel {
  std::shared_ptr<CollectiveChannel> channel;  // use this one for the run
  std::function<void()> stop;                  // call once when the run ends
};

// Watches one run on `ch`; `what` names the run in reports (the op, its
// group and instance, the run and this rank). With the check off, returns
// `ch` itself and a stop that does nothing.
WatchedChannel WatchForStalls(std::shared_ptr<CollectiveChannel> ch, std::string what,
                              const StallCheckOptions& options);

}  // namespace distflow
