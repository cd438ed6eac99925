// ReplicaDeviceSetter: the device function of between-graph replication
// (TensorFlow's tf.train.replica_device_setter). Variables go to the ps
// tasks; every other op goes to this worker's device. Ops that use a
// variable by reference follow it regardless (placement colocates them).
//
//   auto scope = root.WithDeviceFunction(
//       ReplicaDeviceSetter(cluster, "/job:worker/task:1"));
//
// Which ps task holds a variable: round robin in creation order (the
// default), or greedy by bytes (each variable to the ps task holding the
// fewest bytes so far, so one big layer does not share a task with the
// next one). Both are deterministic, so every worker's identical graph puts
// each variable on the same task.
//
// Merging with the device scopes around it, as in TensorFlow: a device
// written inside the setter's scope wins for the fields it sets
// (`s.WithDevice("/job:worker/task:0")` keeps a variable on the worker;
// `s.WithDevice("/device:CPU:0")` only adds the device). From a device set
// outside the setter's scope, fields also win over the setter's; a ps task
// is chosen only when that device's job is unset or is the ps job.
//
// The returned function keeps the strategy's state; it is not thread-safe
// (like Scope).
#pragma once

#include <string>
#include <vector>

#include "distflow/cluster_spec.h"
#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

enum class PsStrategy {
  kRoundRobin,   // ps tasks in turn
  kGreedyBytes,  // the ps task with the fewest variable bytes so far
};

struct DISTFLOW_EXPORT ReplicaDeviceSetterOptions {
  // This worker's device for every op that is not a variable.
  std::string worker_device;
  std::string ps_job = "ps";
  PsStrategy strategy = PsStrategy::kRoundRobin;
  // Ops placed on the ps tasks.
  std::vector<std::string> ps_ops = {"Variable"};
};

DISTFLOW_EXPORT DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, ReplicaDeviceSetterOptions options);
DISTFLOW_EXPORT DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, const std::string& worker_device,
                                                   const std::string& ps_job = "ps");

// The bytes a variable node declares (its shape attribute times its dtype's
// size; unknown dimensions count as 1), the load of kGreedyBytes.
DISTFLOW_EXPORT int64_t VariableBytes(const NodeInfo& node);

}  // namespace distflow
