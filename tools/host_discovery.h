// Host discovery for distflow-launch --host_discovery_script, in Horovod
// elastic's format: the script prints the hosts that may run workers now,
// one `host[:slots]` a line (slots: how many workers the host takes, 1 when
// left out); blank lines and lines starting with '#' are skipped. The
// launcher runs it every few seconds and grows or shrinks the job to match.
//
// A script that cannot run, exits non-zero, outlives its timeout (it is
// then killed with its process group) or prints a malformed line is an
// error naming what went wrong (the line and its number for a malformed
// one); the launcher then keeps the job as it is. Thread-compatible: the
// functions share no state.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distflow {

struct DiscoveredHost {
  std::string host;
  int slots = 1;
};

// The hosts `text` lists, in its order; InvalidArgument naming the first
// malformed line (no host, slots not a number from 1 to 1024, a host listed
// twice).
absl::StatusOr<std::vector<DiscoveredHost>> ParseHostList(const std::string& text);

// Runs `script` with /bin/sh -c (stdin from /dev/null, stderr to the
// launcher's) and parses what it prints. Waits for it to exit and reaps it.
absl::StatusOr<std::vector<DiscoveredHost>> DiscoverHosts(const std::string& script, absl::Duration timeout);

// The slots of every host, summed.
int TotalSlots(const std::vector<DiscoveredHost>& hosts);

}  // namespace distflow
