// How many tasks of a cluster run on the same machine as a given host, so a
// task can size its compute threads to its share of the machine
// (base/cpu_budget.h), and this machine's identity, by which two tasks
// find out that they share one (bulk/ for shared memory, rpc/ for gRPC over
// Unix-domain sockets). Thread-safe.
#pragma once

#include <string>

#include "distflow/cluster_spec.h"

namespace distflow {

// Tasks of `cluster` whose address names the machine `host` names: the same
// host string, or both this machine (a loopback name or address, or this
// machine's hostname). At least 1 (the asking task itself).
int TasksOnHost(const ClusterSpec& cluster, const std::string& host);

// This machine's identity as "boot id/hostname": tasks with the same one run
// on one machine (/proc/sys/kernel/random/boot_id changes at every boot).
// Empty if the boot id cannot be read: nothing then proves that two tasks
// share a machine, and an empty identity never matches (callers check).
const std::string& HostIdentity();

}  // namespace distflow
