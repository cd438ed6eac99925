// ReplicaDeviceSetter: the device function of between-graph replication.
// Variables go to the ps tasks round-robin (in creation order, so every
// worker's identical graph puts each variable on the same ps task); every
// other op goes to this worker's device. Ops that use a variable by reference
// follow it regardless (placement colocates them).
//
//   auto scope = root.WithDeviceFunction(
//       ReplicaDeviceSetter(cluster, "/job:worker/task:1"));
#pragma once

#include <string>

#include "client/scope.h"
#include "distributed/cluster_spec.h"

namespace distflow {

DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, const std::string& worker_device,
                                   const std::string& ps_job = "ps");

}  // namespace distflow
