// CollectiveExecutorImpl: the CollectiveExecutor (kernels/collective.h) of
// one task. It pairs runs across ranks by counting: the k-th run of an
// instance (group_key, instance_key) in one generation of the group on one
// rank meets the k-th run of it on every other rank, which holds because
// every rank of a synchronous program runs the same ops the same number of
// times. Each run gets a channel from the transport, is cancelled with the
// step (the kernel's CancellationManager) or after the op's
// timeout_seconds, and errors name the op, the run and the rank they came
// from.
//
// Generations. A rank that restarts counts from 0 again, so counting alone
// cannot pair it with ranks that kept running. With a rendezvous (set by the
// server: the coordinator's GroupRendezvous, proto/elastic.proto) every
// group of more than one rank (of one job, a process set, or across jobs
// by group_tasks) is built in generations: a rank
// probes before its first run (a fresh job starts in generation 1 at once;
// a restarted rank joins a rebuild) and rebuilds as soon as a run failed:
// every rank of the group asks the rendezvous, and all leave it with one
// new generation, which goes into every run's ids (so runs of the old
// generation never pair with the new), and with the root, the rank that
// CollectiveBcastSend(from_group_root) sends from: the lowest of the ranks
// that were in the newest generation (the oldest ranks hold the state).
// Runs that arrive while the group is being built wait for it (the step's
// cancellation ends the wait). A run of a generation that other ranks have
// left (they wait to rebuild the group: their own run failed) can never
// finish; a watcher asks the rendezvous about runs older than a second,
// once a second, and fails such runs naming the ranks that left, so every
// rank moves on to the rebuild. Without a rendezvous (in-process tests, a
// task without coordination) every run is of generation 0, root rank 0.
//
// Elastic groups. A kernel's group_size 0 is the elastic group (Horovod's
// hvd.elastic): every live task of the job, rebuilt at the coordinator with
// the tasks alive at that moment. Its runs take the size and the ranks
// (task indices in rank order, rank 0 the oldest: it holds the state) of
// the group's last build, so one graph serves every size the group takes.
// The program rebuilds it at a step boundary (RebuildNow) when members
// joined, and after a failure as any group.
//
// Cycle-time fusion. A CollectiveReduce with fusion_cycle_ms > 0 is not
// run alone: it goes to the FusionBuffer (fusion_buffer.h) of its stream
// (group, generation, and what the fused reduction must share), which runs
// what became ready together as one reduction whose flushes are runs of the
// stream's own instance. A buffer that failed is replaced by a fresh one at
// the next op (which, with a rendezvous, runs in the rebuilt generation).
//
// Every run is also watched by the stall check (stall_check.h), which
// reports runs that wait on ranks of their group for longer than its
// interval.
//
// Owns its transport. Thread-safe.
#pragma once

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/thread_pool.h"
#include "collective/fusion_buffer.h"
#include "collective/stall_check.h"
#include "collective/transport.h"
#include "kernels/collective.h"

namespace distflow {

// One rank's ask to (re)build its group of `group_size`, and the answer.
struct GroupAsk {
  int group_size = 1;
  // The group's tasks (indices in the job) in rank order: 0..group_size-1
  // for the job's group, a process set's otherwise; empty for a group
  // across jobs, which names its tasks instead.
  std::vector<int> members;
  // A group across jobs (CollectiveParams::member_tasks, as the op spells
  // them) in rank order; empty for a group of one job.
  std::vector<std::string> tasks;
  int64_t last_generation = 0;  // 0: this rank holds no state of the group yet
  uint64_t nonce = 0;           // the same while this ask is polled
  bool query = false;           // only: is a rebuild under way? (see `waiting`)
  bool probe = false;           // this process's first ask (proto/elastic.proto)
};
struct GroupAnswer {
  bool done = false;
  int64_t generation = 0;
  int root = 0;
  std::string missing;       // not done: the ranks that have not asked, named
  std::string waiting;       // a query: the ranks waiting to rebuild, named ("": none)
  std::vector<int> members;  // an elastic group: its task indices in rank order
};
// A group as last built.
struct GroupState {
  int64_t generation = 0;
  int root = 0;
  std::vector<int> members;  // an elastic group's task indices in rank order
};
// Asks once (never blocks for long); the executor polls until done.
using GroupRendezvousFn = std::function<absl::StatusOr<GroupAnswer>(const GroupAsk&)>;

class CollectiveExecutorImpl final : public CollectiveExecutor {
 public:
  explicit CollectiveExecutorImpl(std::unique_ptr<CollectiveTransport> transport, StallCheckOptions stall_check = {});
  ~CollectiveExecutorImpl() override;

  void Run(const CollectiveParams& params, const Tensor& input, CancellationManager* cm, DoneCallback done) override;

  // Turns generations on (see above); `rebuild_timeout` bounds one
  // rebuild. Call before the first run.
  void SetRendezvous(GroupRendezvousFn rendezvous, absl::Duration rebuild_timeout);
  // The group of tasks 0..group_size-1 must be rebuilt before its next run
  // (a rank of it died).
  void MarkBroken(int group_size);
  // The generation the group of tasks 0..group_size-1 (0: the elastic
  // group) is in (0: never built).
  int64_t generation(int group_size);
  // The group `params` runs in (a job's, a process set's, one across jobs,
  // or the elastic group) as last built: generation 0 if never built.
  GroupState StateOf(const CollectiveParams& params);
  // Rebuilds the group of `group_size` (0: the elastic group) now, joining
  // a rebuild under way if there is one, and waits up to `timeout` for it:
  // how every rank of an elastic group takes in the members that joined, at
  // the same step. FailedPrecondition without a rendezvous.
  absl::StatusOr<GroupState> RebuildNow(int group_size, absl::Duration timeout);
  // Ends the rebuilds and the watcher before the objects the rendezvous
  // reaches (the server's coordination agent, its peers' cache) go: runs
  // waiting for a rebuild fail Cancelled, later runs and rebuilds are
  // refused, and it returns once no thread of this executor is inside the
  // rendezvous (an ask under way ends within its own deadline). The owner
  // calls it before it tears those objects down; the destructor calls it
  // too. Idempotent; not from a callback of this executor.
  void Shutdown();
  // The timer that runs the fusion cycle (default: Timer::Global()); a
  // test gives one on a fake clock. Call before the first run.
  void SetFusionTimer(Timer* timer);

 private:
  struct Group {
    int64_t generation = 0;
    int root = 0;
    bool ready = false;
    bool asking = false;
    std::vector<int> members;                                // an elastic group's
    std::vector<std::function<void(absl::Status)>> waiters;  // runs waiting for the rebuild
  };
  // Runs `params` in the generation it names, with `root` as the group's
  // root: as run `seq` on `opened` when given (a fusion flush), else as the
  // instance's next run on a channel of its own.
  void RunIn(CollectiveParams params, int root, const Tensor& input, CancellationManager* cm, DoneCallback done,
             std::shared_ptr<CollectiveChannel> opened = nullptr, int64_t seq = -1);
  // Hands a cycle-fused reduction (UsesCycleFusion) to its stream's buffer.
  void Fuse(CollectiveParams params, const Tensor& input, CancellationManager* cm, DoneCallback done);
  std::shared_ptr<FusionBuffer> MakeFusionBuffer(const std::string& key, const CollectiveParams& stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A group is known by its members (GroupMembers: a process set's tasks,
  // or 0..group_size-1), or a group across jobs by its task names; each is
  // rebuilt on its own. The elastic group, whose members change with each
  // build, is known by neither.
  struct GroupId {
    std::vector<int> members;
    std::vector<std::string> tasks;
    bool elastic() const { return members.empty() && tasks.empty(); }
    int size() const { return static_cast<int>(members.size() + tasks.size()); }
    auto operator<=>(const GroupId&) const = default;
  };
  static GroupId GroupOf(const CollectiveParams& params);
  static GroupId FirstTasks(int group_size);
  static std::string GroupName(const GroupId& group);
  // Polls the rendezvous until the group is built (on pool_).
  void Rebuild(const GroupId& group);
  void RunFailed(const GroupId& group, int64_t generation);
  // Fails runs of generations that other ranks have left (on pool_, while
  // runs are in flight).
  void WatchRuns();
  struct InFlight {
    GroupId group;
    int64_t generation = 0;
    std::weak_ptr<CollectiveChannel> channel;
    absl::Time start;
  };
  int64_t NextSeq(int64_t generation, int64_t group_key, int64_t instance_key);

  const std::unique_ptr<CollectiveTransport> transport_;
  const StallCheckOptions stall_check_;
  absl::Mutex mu_;
  GroupRendezvousFn rendezvous_ ABSL_GUARDED_BY(mu_);
  absl::Duration rebuild_timeout_ ABSL_GUARDED_BY(mu_) = absl::Minutes(5);
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> next_seq_ ABSL_GUARDED_BY(mu_);
  std::map<GroupId, Group> groups_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, InFlight> inflight_ ABSL_GUARDED_BY(mu_);
  uint64_t next_run_ ABSL_GUARDED_BY(mu_) = 1;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Cycle-time fusion: each stream's buffer, and where a stream's next
  // buffer numbers its flushes from after one failed.
  std::map<std::string, std::shared_ptr<FusionBuffer>> fusion_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> fusion_next_flush_ ABSL_GUARDED_BY(mu_);
  Timer* fusion_timer_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Mutex shutdown_mu_;           // serialises Shutdown's join
  std::unique_ptr<ThreadPool> pool_;  // rebuilds and the watcher; joined by Shutdown (Schedule only while !stopping_)
  std::unique_ptr<ThreadPool> fusion_pool_;  // starts flushes the cycle timer decides; joined by Shutdown
};

}  // namespace distflow
