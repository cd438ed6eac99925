// WorkerCollectiveTransport: the CollectiveTransport (collective/transport.h)
// of a task, over the same path as every tensor between tasks. A rank leaves
// what it sends in its own WorkerRendezvous; the receiving rank asks the
// sender's WorkerInterface for it (RecvTensorAsync), so the bytes travel as
// a RecvTensor does: in memory to this process's own worker, else over gRPC
// with the cluster token and TLS, large tensors over the bulk port. The
// transport never sees which.
//
// A group of size n is the tasks 0..n-1 of this task's job (the rank is the
// task index): a worker job of N tasks is the group of an all-reduce over N
// workers. A process set's group (CollectiveParams::members) is the tasks
// it lists, the rank being the position in that list; a group across jobs
// (CollectiveParams::member_tasks) is the tasks it names, of any jobs. Each run of a collective gets its own rendezvous
// step id (a stable hash of the group's generation, the group, instance and run), so aborting a run drops exactly its
// tensors and fails exactly its waiters, here and on the peers. Thread-safe; the rendezvous must outlive the transport.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "collective/transport.h"
#include "distflow/cluster_spec.h"
#include "rpc/worker_interface.h"

namespace distflow {

class WorkerRendezvous;

class WorkerCollectiveTransport final : public CollectiveTransport {
 public:
  using GetWorkerFn = std::function<absl::StatusOr<std::shared_ptr<WorkerInterface>>(const std::string& task)>;

  WorkerCollectiveTransport(std::string task, ClusterSpec cluster, WorkerRendezvous* rendezvous,
                            GetWorkerFn get_worker);

  absl::StatusOr<std::shared_ptr<CollectiveChannel>> Open(const CollectiveParams& params, int64_t seq) override;

  // The rendezvous step id of run `seq` of (group_key, instance_key) in the
  // group's `generation`: the same on every task.
  static int64_t StepIdFor(int64_t generation, int64_t group_key, int64_t instance_key, int64_t seq);

  // A group across jobs' tasks (CollectiveParams::member_tasks) resolved
  // against `cluster`: their full names (TaskName) in rank order, and the
  // rank of `me` (a full task name) among them. InvalidArgument naming a
  // name that is not a task's, a task the cluster lacks (and what it has),
  // a task listed twice, or `me` outside the list. The server's group
  // rebuild resolves them as the channel does.
  static absl::StatusOr<std::pair<std::vector<std::string>, int>> ResolveGroupTasks(
      const ClusterSpec& cluster, const std::vector<std::string>& names, const std::string& me);

 private:
  // A group of tasks of any jobs (CollectiveParams::member_tasks); `me` is
  // this task's name.
  absl::StatusOr<std::shared_ptr<CollectiveChannel>> OpenAcrossJobs(const CollectiveParams& params, int64_t seq,
                                                                    const std::string& me);
  const std::string task_;
  const ClusterSpec cluster_;
  WorkerRendezvous* const rendezvous_;
  const GetWorkerFn get_worker_;
};

}  // namespace distflow
