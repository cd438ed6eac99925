#include "worker/worker_collective_transport.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "worker/worker_rendezvous.h"

namespace distflow {
namespace {

class WorkerCollectiveChannel final : public CollectiveChannel {
 public:
  WorkerCollectiveChannel(std::vector<std::string> tasks, int rank, int64_t step_id, std::string prefix,
                          WorkerRendezvous* rendezvous, WorkerCollectiveTransport::GetWorkerFn get_worker)
      : tasks_(std::move(tasks)),
        rank_(rank),
        step_id_(step_id),
        prefix_(std::move(prefix)),
        rendezvous_(rendezvous),
        get_worker_(std::move(get_worker)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(tasks_.size()); }
  std::string RankName(int r) const override {
    return absl::StrCat("rank ", r, " (", tasks_[static_cast<size_t>(r)], ")");
  }

  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    return rendezvous_->Send(step_id_, Key(rank_, to, tag), value);
  }

  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    auto named = [this, from, done = std::move(done)](absl::Status s, Tensor t) {
      if (!s.ok() && cm_.IsCancelled() && !cm_.reason().ok()) {
        // This run's own Abort cancelled the call (the step's cancellation,
        // timeout_seconds, the group moving on to a new generation): its
        // reason ends the run, in its code (the call's "cancelled" blamed on
        // the peer says nothing), with whom the run waited for. A run of a
        // generation the others left then fails Unavailable, which
        // MonitoredSession recovers from.
        const absl::Status why = cm_.reason();
        s = absl::Status(why.code(), absl::StrCat("waiting for ", RankName(from), ": ", why.message()));
      } else if (!s.ok()) {
        s = absl::Status(s.code(), absl::StrCat(RankName(from), " failed or cannot be reached: ", s.message()));
      }
      done(std::move(s), std::move(t));
    };
    absl::StatusOr<std::shared_ptr<WorkerInterface>> peer = get_worker_(tasks_[static_cast<size_t>(from)]);
    if (!peer.ok()) {
      named(peer.status(), Tensor());
      return;
    }
    // The peer's interface stays alive until the call ends.
    (*peer)->RecvTensorAsync(step_id_, Key(from, rank_, tag), &cm_,
                             [peer = *peer, named = std::move(named)](absl::Status s, Tensor t) {
                               (void)peer;
                               named(std::move(s), std::move(t));
                             });
  }

  // The first abort wins: the receives it cancels end the run again (an
  // algorithm aborts on a failed receive), and the peers must see the
  // first reason, not "cancelled".
  void Abort(const absl::Status& status) override {
    if (aborted_.exchange(true)) return;
    cm_.StartCancel(status);                   // our receives in flight
    rendezvous_->AbortStep(step_id_, status);  // the peers' receives of what we sent
  }

 private:
  std::string Key(int from, int to, const std::string& tag) const {
    return absl::StrCat(prefix_, tag, ";", from, ">", to);
  }

  const std::vector<std::string> tasks_;
  const int rank_;
  const int64_t step_id_;
  const std::string prefix_;
  WorkerRendezvous* const rendezvous_;
  const WorkerCollectiveTransport::GetWorkerFn get_worker_;
  CancellationManager cm_;  // cancels this run's receives
  std::atomic<bool> aborted_{false};
};

}  // namespace

WorkerCollectiveTransport::WorkerCollectiveTransport(std::string task, ClusterSpec cluster,
                                                     WorkerRendezvous* rendezvous, GetWorkerFn get_worker)
    : task_(std::move(task)),
      cluster_(std::move(cluster)),
      rendezvous_(rendezvous),
      get_worker_(std::move(get_worker)) {}

int64_t WorkerCollectiveTransport::StepIdFor(int64_t generation, int64_t group_key, int64_t instance_key, int64_t seq) {
  // FNV-1a over the four numbers: stable across processes (absl::Hash is not).
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : {generation, group_key, instance_key, seq}) {
    for (int b = 0; b < 8; ++b) {
      h ^= (static_cast<uint64_t>(v) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return static_cast<int64_t>(h | (1ull << 62));  // apart from small step ids
}

absl::StatusOr<std::pair<std::vector<std::string>, int>> WorkerCollectiveTransport::ResolveGroupTasks(
    const ClusterSpec& cluster, const std::vector<std::string>& names, const std::string& me) {
  std::vector<std::string> tasks;
  int rank = -1;
  for (const std::string& name : names) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(name);
    if (!d.ok() || !d->has_job || !d->has_task) {
      return absl::InvalidArgumentError(
          absl::StrCat("group_tasks has '", name, "', which is not a task name; write /job:NAME/task:INDEX"));
    }
    std::vector<int> indices = cluster.task_indices(d->job);
    if (std::find(indices.begin(), indices.end(), d->task) == indices.end()) {
      std::sort(indices.begin(), indices.end());
      return absl::InvalidArgumentError(absl::StrCat(
          "group_tasks names ", name, ", which the cluster does not have: ",
          indices.empty()
              ? absl::StrCat("it has no job '", d->job, "' (its jobs: ", absl::StrJoin(cluster.jobs(), ", "), ")")
              : absl::StrCat("job '", d->job, "' has tasks ", absl::StrJoin(indices, ", ")),
          "; list tasks of the cluster"));
    }
    const std::string task = TaskName(d->job, d->task);
    if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
      return absl::InvalidArgumentError(absl::StrCat("group_tasks lists ", task, " twice"));
    }
    if (task == me) rank = static_cast<int>(tasks.size());
    tasks.push_back(task);
  }
  if (rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(me, " is not in the group: its group_tasks are ",
                                                   absl::StrJoin(tasks, ", "),
                                                   "; only a member of the group runs its collectives"));
  }
  return std::make_pair(std::move(tasks), rank);
}

absl::StatusOr<std::shared_ptr<CollectiveChannel>> WorkerCollectiveTransport::OpenAcrossJobs(
    const CollectiveParams& params, int64_t seq, const std::string& me) {
  ASSIGN_OR_RETURN(auto resolved, ResolveGroupTasks(cluster_, params.member_tasks, me));
  return std::shared_ptr<CollectiveChannel>(std::make_shared<WorkerCollectiveChannel>(
      std::move(resolved.first), resolved.second,
      StepIdFor(params.generation, params.group_key, params.instance_key, seq),
      absl::StrCat("collective;", params.generation, ";", params.group_key, ";", params.instance_key, ";", seq, ";"),
      rendezvous_, get_worker_));
}

absl::StatusOr<std::shared_ptr<CollectiveChannel>> WorkerCollectiveTransport::Open(const CollectiveParams& params,
                                                                                   int64_t seq) {
  absl::StatusOr<DeviceName> me = DeviceName::Parse(task_);
  if (!me.ok() || !me->has_job || !me->has_task) {
    return absl::InternalError(absl::StrCat("this task's name '", task_, "' does not say its job and index"));
  }
  if (!params.member_tasks.empty()) return OpenAcrossJobs(params, seq, TaskName(me->job, me->task));
  std::vector<int> indices = cluster_.task_indices(me->job);
  std::sort(indices.begin(), indices.end());
  if (params.elastic) {
    // The elastic group: its ranks are the tasks the coordinator put in it
    // (joined ones too, which the cluster spec may lack).
    indices = params.members;
    if (static_cast<int>(indices.size()) != params.group_size) {
      return absl::InternalError(
          absl::StrCat("an elastic group of ", params.group_size, " ranks lists ", indices.size(), " members"));
    }
    if (std::find(indices.begin(), indices.end(), me->task) == indices.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          task_, " is not in generation ", params.generation, " of the elastic group (tasks ",
          absl::StrJoin(indices, ","), " of job '", me->job, "'): it asked to join after the group was built"));
    }
  } else if (!params.members.empty()) {
    // A process set: the tasks group_members names, in that order.
    for (int m : params.members) {
      if (!std::binary_search(indices.begin(), indices.end(), m)) {
        return absl::InvalidArgumentError(
            absl::StrCat("group_members names task ", m, " of job '", me->job,
                         "', which has no such task (its tasks: ", absl::StrJoin(indices, ", "), ")"));
      }
    }
    indices = params.members;
  } else if (static_cast<int>(indices.size()) < params.group_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_size is ", params.group_size, " but job '", me->job, "' has ", indices.size(),
                     " task(s); a group is the first group_size tasks of the job that runs the op"));
  }
  indices.resize(static_cast<size_t>(params.group_size));
  std::vector<std::string> tasks;
  int rank = -1;
  for (size_t r = 0; r < indices.size(); ++r) {
    if (indices[r] == me->task) rank = static_cast<int>(r);
    tasks.push_back(TaskName(me->job, indices[r]));
  }
  if (rank < 0) {
    if (!params.members.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(task_, " is not in the group: its members are ",
                                                     absl::StrJoin(tasks, ", "),
                                                     "; only a member of a process set runs its collectives"));
    }
    return absl::InvalidArgumentError(absl::StrCat(task_, " is not in the group: a group of ", params.group_size,
                                                   " is tasks ", tasks.front(), " to ", tasks.back()));
  }
  return std::shared_ptr<CollectiveChannel>(std::make_shared<WorkerCollectiveChannel>(
      std::move(tasks), rank, StepIdFor(params.generation, params.group_key, params.instance_key, seq),
      absl::StrCat("collective;", params.generation, ";", params.group_key, ";", params.instance_key, ";", seq, ";"),
      rendezvous_, get_worker_));
}

}  // namespace distflow
