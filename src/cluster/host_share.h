// How many tasks of a cluster run on the same machine as a given host, so a
// task can size its compute threads to its share of the machine
// (base/cpu_budget.h). Thread-safe (no state).
#pragma once

#include <string>

#include "distflow/cluster_spec.h"

namespace distflow {

// Tasks of `cluster` whose address names the machine `host` names: the same
// host string, or both this machine (a loopback name or address, or this
// machine's hostname). At least 1 (the asking task itself).
int TasksOnHost(const ClusterSpec& cluster, const std::string& host);

}  // namespace distflow
