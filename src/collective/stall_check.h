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
// from every other, so every waiting rank names every late one. In the ring
// a rank hears only from the rank before it, so for a ring of 3 or more the
// watch announces the run (Announce::kRing): as it starts, each rank sends
// an empty tensor to every rank other than the one after it (that one gets
// its data) and receives one from every rank other than the one before it.
// A rank then knows of each peer whether it has joined, and names every
// late one; the neighbour it waits on, joined, is named as "joined, but not
// yet sent". That costs n-2 empty messages per rank and run, only with the
// check on. Algorithms whose ranks hear from only some others (Adasum's
// recursive doubling) announce to every rank (Announce::kAll, n-1).
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

// Whether the ranks of a run announce that they joined it (see above).
enum class Announce { kNone, kRing, kAll };

// Watches one run on `ch`; `what` names the run in reports (the op, its
// group and instance, the run and this rank); `announce` for a run whose
// ranks do not all hear from each other (see above). With the check off,
// returns `ch` itself and a stop that does nothing.
WatchedChannel WatchForStalls(std::shared_ptr<CollectiveChannel> ch, std::string what, const StallCheckOptions& options,
                              Announce announce = Announce::kNone);

// The tag of the announcements (no algorithm uses it).
inline constexpr char kJoinedTag[] = "joined";

}  // namespace distflow
