// Elastic membership, from a program's side: a worker that is not in the
// cluster spec joins a running job through the job's coordinator (ps 0, or
// the chief where there is no ps job; it keeps the membership with the
// heartbeats), and anyone may ask the coordinator who is in the job now.
//
//   ASSIGN_OR_RETURN(JoinedTask me, JoinCluster("10.0.0.1:2222", "worker", "10.0.0.7:2230"));
//   // me.task_index: this worker's index; me.cluster: the job now, this worker included.
//   Server::Create(me.cluster, "worker", me.task_index, options);
//
// A joined task is a task like the others from then on: it heartbeats, is
// declared dead if it stops, and leaves when its server stops cleanly. The
// calls carry the process's cluster token (auth.h). Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distflow/cluster_spec.h"
#include "distflow/export.h"

namespace distflow {

struct JoinedTask {
  int task_index = -1;
  ClusterSpec cluster;  // every live member with its address, the joiner included
};

// Joins `job` of the running job whose coordinator serves on
// `coordinator_address`, as the task that will serve on `address`
// (host:port). Retries while the coordinator is unreachable, for up to
// `wait`. InvalidArgument for a malformed job or address, FailedPrecondition
// if a live task has `address` or the task at `coordinator_address` is not
// a coordinator (then the message names the coordinator to ask).
DISTFLOW_EXPORT absl::StatusOr<JoinedTask> JoinCluster(const std::string& coordinator_address, const std::string& job,
                                                       const std::string& address,
                                                       absl::Duration wait = absl::Seconds(60));

struct ClusterMember {
  std::string task;     // "/job:worker/replica:0/task:3"
  std::string address;  // "" if the coordinator does not know it
  std::string state;    // UNKNOWN, ALIVE, DEAD or LEFT (see src/coordination)
  bool joined = false;  // joined the running job (not in the cluster spec)
};

// Every task the coordinator at `coordinator_address` knows, in name order.
DISTFLOW_EXPORT absl::StatusOr<std::vector<ClusterMember>> ListClusterMembers(const std::string& coordinator_address);

// A counter of the workers in the job now, for elastic synchronous training
// (SyncReplicasOptions::live_replicas): the tasks of `job` and of a "chief"
// job that the coordinator at `coordinator_address` holds alive or has not
// heard from yet (a spec worker still starting counts), not the dead nor
// the ones that left. Each call is one Members call (2 s deadline) on a
// channel the counter keeps.
DISTFLOW_EXPORT std::function<absl::StatusOr<int>()> LiveWorkerCounter(const std::string& coordinator_address,
                                                                       const std::string& job = "worker");

}  // namespace distflow
