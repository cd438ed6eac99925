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

#include <cstdint>
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

// A worker's shard of the data in the job as it is now (what the book's
// program does with --reshard_every_steps): shard `index` of `count`, where
// `count` is the number of tasks of `job` that the coordinator at
// `coordinator_address` holds alive or has not heard from yet (a spec
// worker still starting counts; the dead and the ones that left do not)
// and `index` is the position of `task_index` among them by task index.
// Every live worker that asks after the last join or leave gets a
// different index of the same count, so their shards (tf.data's
// shard(count, index)) are disjoint and cover the data. Ask again every few
// steps and re-read the data when the answer changes. NotFound if the
// coordinator does not hold `task_index` of `job` as live; one Members call.
struct WorkerShard {
  int index = -1;
  int count = 0;
};
DISTFLOW_EXPORT absl::StatusOr<WorkerShard> LiveWorkerShard(const std::string& coordinator_address, int task_index,
                                                            const std::string& job = "worker");

class Server;

// The elastic collective group of a task (Horovod's hvd.elastic): every
// live worker of the job, in the collectives whose group_size is 0. The
// group is built at the job's coordinator with the workers alive at that
// moment; rank 0 is the lowest task among those that were in the newest
// generation before (they hold the state), the ones that joined or
// restarted come after it.
struct ElasticGroup {
  int64_t generation = 0;
  int rank = -1;                     // this task's
  std::vector<std::string> members;  // task names in rank order ("/job:worker/replica:0/task:3")
};

// (Re)builds `server`'s elastic group now and returns it: every live
// worker of the job must call this (at the same step: after a failure, or
// when ElasticGroupUpdates says members are waiting); it returns once each
// has, or after `timeout` (DeadlineExceeded naming who is missing). A
// worker that dies meanwhile is not waited for once the heartbeats have
// declared it dead. FailedPrecondition for a server without failure
// detection (heartbeat_timeout_ms 0).
DISTFLOW_EXPORT absl::StatusOr<ElasticGroup> RebuildElasticGroup(Server& server,
                                                                 absl::Duration timeout = absl::Minutes(5));

// What changed since the generation `server`'s elastic group is in: the
// workers waiting to enter it (joined or restarted) and the members of that
// generation that died or left. One call to the coordinator.
struct ElasticGroupChanges {
  std::vector<std::string> waiting;
  std::vector<std::string> gone;
};
DISTFLOW_EXPORT absl::StatusOr<ElasticGroupChanges> ElasticGroupUpdates(Server& server);

}  // namespace distflow
