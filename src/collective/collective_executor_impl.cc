#include "collective/collective_executor_impl.h"

#include <atomic>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "base/logging.h"
#include "base/timer.h"
#include "collective/adasum.h"
#include "collective/algorithms.h"
#include "collective/fp16_channel.h"
#include "collective/reduce_ops.h"
#include "collective/run_observer.h"
#include "collective/shape_check.h"

namespace distflow {
namespace {

// One run's end: deregisters from the step's cancellation and the timer,
// names the op in errors, then calls the kernel back. Shared by the
// callbacks that can end it.
struct RunEnd {
  std::string what;
  CancellationManager* cm = nullptr;
  CancellationManager::Token token = CancellationManager::kInvalidToken;
  std::atomic<Timer::Id> timer{0};
  std::atomic<bool> timer_fired{false};
  CollectiveExecutor::DoneCallback done;
  std::function<void()> stop_stall_check;
  std::shared_ptr<RunObserver> observer;  // metrics and the trace's phases

  void Finish(absl::StatusOr<Tensor> result) {
    if (stop_stall_check) stop_stall_check();
    if (observer) observer->Finish(result.status());
    if (cm != nullptr && token != CancellationManager::kInvalidToken) cm->Deregister(token);
    // The timer's own callback may be what ends the run: it must not cancel itself.
    if (const Timer::Id id = timer.load(); id != 0 && !timer_fired.load()) Timer::Global()->Cancel(id);
    // (An abort's own reason, e.g. the timeout's, names the run already.)
    if (!result.ok() && !absl::StartsWith(result.status().message(), what)) {
      result = absl::Status(result.status().code(), absl::StrCat(what, ": ", result.status().message()));
    }
    done(std::move(result));
  }
};

}  // namespace

CollectiveExecutorImpl::CollectiveExecutorImpl(std::unique_ptr<CollectiveTransport> transport,
                                               StallCheckOptions stall_check)
    : transport_(std::move(transport)),
      stall_check_(std::move(stall_check)),
      pool_(std::make_unique<ThreadPool>("df_group", 3)),
      fusion_pool_(std::make_unique<ThreadPool>("df_fusion", 1)) {}

CollectiveExecutorImpl::~CollectiveExecutorImpl() { Shutdown(); }

void CollectiveExecutorImpl::Shutdown() {
  std::vector<std::function<void(absl::Status)>> waiters;
  std::vector<std::shared_ptr<FusionBuffer>> buffers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [id, g] : groups_) {
      for (auto& w : g.waiters) waiters.push_back(std::move(w));
      g.waiters.clear();
    }
    for (auto& [key, b] : fusion_) buffers.push_back(std::move(b));
    fusion_.clear();
  }
  const absl::Status stop = absl::CancelledError("this task's collective executor is shutting down");
  for (auto& w : waiters) w(stop);
  for (auto& b : buffers) b->Fail(stop);
  // Nothing is scheduled once stopping_ is set (every Schedule checks it
  // under mu_), so joining the pool ends every rebuild and the watcher.
  absl::MutexLock lock(&shutdown_mu_);
  if (pool_ != nullptr) {
    DF_CHECK(!pool_->InPool()) << "CollectiveExecutorImpl::Shutdown called from one of its own threads";
    pool_.reset();
  }
  if (fusion_pool_ != nullptr) {
    DF_CHECK(!fusion_pool_->InPool()) << "CollectiveExecutorImpl::Shutdown called from one of its own threads";
    fusion_pool_.reset();
  }
}

void CollectiveExecutorImpl::SetRendezvous(GroupRendezvousFn rendezvous, absl::Duration rebuild_timeout) {
  absl::MutexLock lock(&mu_);
  rendezvous_ = std::move(rendezvous);
  rebuild_timeout_ = rebuild_timeout;
}

CollectiveExecutorImpl::GroupId CollectiveExecutorImpl::FirstTasks(int group_size) {
  CollectiveParams p;
  p.group_size = group_size;
  return GroupId{GroupMembers(p), {}};
}

CollectiveExecutorImpl::GroupId CollectiveExecutorImpl::GroupOf(const CollectiveParams& params) {
  if (params.elastic || params.group_size == 0) return GroupId();
  if (!params.member_tasks.empty()) return GroupId{{}, params.member_tasks};
  return GroupId{GroupMembers(params), {}};
}

// "group of 3 ranks", "group of tasks 0, 2" for a process set, "group of
// tasks /job:ps/task:0, /job:worker/task:1" across jobs, or the elastic
// group (no members: they are decided at each build).
std::string CollectiveExecutorImpl::GroupName(const GroupId& group) {
  if (group.elastic()) return "elastic collective group of the job's live tasks";
  if (!group.tasks.empty()) return absl::StrCat("collective group of tasks ", absl::StrJoin(group.tasks, ", "));
  if (group == FirstTasks(group.size())) return absl::StrCat("collective group of ", group.size(), " ranks");
  return absl::StrCat("collective group of tasks ", absl::StrJoin(group.members, ", "));
}

void CollectiveExecutorImpl::MarkBroken(int group_size) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(FirstTasks(group_size));
  if (it != groups_.end()) it->second.ready = false;
}

int64_t CollectiveExecutorImpl::generation(int group_size) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(FirstTasks(group_size));
  return it == groups_.end() ? 0 : it->second.generation;
}

GroupState CollectiveExecutorImpl::StateOf(const CollectiveParams& params) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(GroupOf(params));
  if (it == groups_.end()) return GroupState();
  return GroupState{it->second.generation, it->second.root, it->second.members};
}

absl::StatusOr<GroupState> CollectiveExecutorImpl::RebuildNow(int group_size, absl::Duration timeout) {
  struct Result {
    absl::Notification done;
    absl::Status status;
  };
  auto result = std::make_shared<Result>();
  const GroupId group = FirstTasks(group_size);
  {
    absl::MutexLock lock(&mu_);
    if (!rendezvous_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", GroupName(group), " cannot be rebuilt: this task has no coordinator (failure detection is off)"));
    }
    if (stopping_) return absl::CancelledError("this task's collective executor is shutting down");
    Group& g = groups_[group];
    g.ready = false;
    g.waiters.push_back([result](absl::Status s) {
      result->status = std::move(s);
      result->done.Notify();
    });
    if (!g.asking) {
      g.asking = true;
      pool_->Schedule([this, group] { Rebuild(group); });
    }
  }
  if (!result->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("the ", GroupName(group), " was not rebuilt within ",
                                                    absl::FormatDuration(timeout),
                                                    ": not every live task of the group asked to rebuild it"));
  }
  if (!result->status.ok()) return result->status;
  absl::MutexLock lock(&mu_);
  const Group& g = groups_[group];
  return GroupState{g.generation, g.root, g.members};
}

void CollectiveExecutorImpl::RunFailed(const GroupId& group, int64_t generation) {
  absl::MutexLock lock(&mu_);
  if (!rendezvous_) return;
  auto it = groups_.find(group);
  // A late failure of an older generation says nothing about this one.
  if (it == groups_.end() || it->second.generation != generation || !it->second.ready) return;
  Group& g = it->second;
  g.ready = false;
  // Join the rebuild now rather than at the next run: the peers may be
  // waiting in it already, and their runs after it wait for this rank.
  if (!g.asking && !stopping_) {
    g.asking = true;
    pool_->Schedule([this, group] { Rebuild(group); });
  }
}

int64_t CollectiveExecutorImpl::NextSeq(int64_t generation, int64_t group_key, int64_t instance_key) {
  absl::MutexLock lock(&mu_);
  return next_seq_[{generation, group_key, instance_key}]++;
}

void CollectiveExecutorImpl::Run(const CollectiveParams& params, const Tensor& input, CancellationManager* cm,
                                 DoneCallback done) {
  if (params.kind != CollectiveKind::kBroadcastRecv && !IsCollectiveDtype(input.dtype())) {
    done(absl::InvalidArgumentError(absl::StrCat(DescribeCollective(params),
                                                 ": collectives take float32, float64, "
                                                 "int32 and int64, not ",
                                                 DataTypeName(input.dtype()))));
    return;
  }
  if (absl::Status s = CheckGroupMembers(params); !s.ok()) {
    done(s);
    return;
  }
  CollectiveParams p = params;
  int root = 0;
  bool waiting = false, cancelled = false, shutting_down = false;
  {
    absl::MutexLock lock(&mu_);
    if (params.group_size == 0 && !rendezvous_) {
      done(absl::FailedPreconditionError(
          absl::StrCat(DescribeCollective(params),
                       ": an elastic group (group_size 0) is built at the job's coordinator, and this task has "
                       "none (failure detection is off); give group_size the number of ranks")));
      return;
    }
    // Every group of more than one rank is built at the coordinator: a
    // job's, a process set's, one across jobs (group_tasks), the elastic one.
    if (rendezvous_ && params.group_size != 1) {
      const GroupId group = GroupOf(params);
      Group& g = groups_[group];
      if (!g.ready && stopping_) {
        shutting_down = true;
      } else if (!g.ready) {
        // Wait for the group to be (re)built, then run in its generation;
        // the step's cancellation (its deadline) ends the wait.
        struct Waiter {
          std::atomic<bool> ended{false};
          CancellationManager::Token token = CancellationManager::kInvalidToken;
        };
        auto w = std::make_shared<Waiter>();
        auto end = [this, params, input, cm, done, w](absl::Status s, bool cancelled) {
          if (w->ended.exchange(true)) return;
          if (!cancelled && cm != nullptr && w->token != CancellationManager::kInvalidToken) cm->Deregister(w->token);
          if (!s.ok()) {
            done(absl::Status(s.code(), absl::StrCat(DescribeCollective(params), ": ", s.message())));
            return;
          }
          Run(params, input, cm, done);
        };
        if (cm != nullptr) {
          w->token = cm->Register([end, group, cm] {
            end(StepCancelledError(
                    absl::StrCat("waiting for the ", GroupName(group), " to be rebuilt (for every rank to join it)"),
                    cm),
                true);
          });
          cancelled = w->token == CancellationManager::kInvalidToken;
        }
        if (!cancelled) g.waiters.push_back([end](absl::Status s) { end(std::move(s), false); });
        if (!g.asking && !cancelled) {
          g.asking = true;
          pool_->Schedule([this, group] { Rebuild(group); });
        }
        waiting = true;
      }
      p.generation = g.generation;
      root = g.root;
      if (params.group_size == 0) {
        p.group_size = static_cast<int>(g.members.size());
        p.members = g.members;
        p.elastic = true;
      }
    }
  }
  if (cancelled) {
    done(StepCancelledError(absl::StrCat(DescribeCollective(params), ", not started"), cm));
    return;
  }
  if (shutting_down) {
    done(absl::CancelledError(absl::StrCat(DescribeCollective(params),
                                           ": this task's collective executor is shutting down (its group needs a "
                                           "rebuild, which it no longer runs)")));
    return;
  }
  if (waiting) return;
  if (UsesCycleFusion(p) && p.group_size > 1) {
    Fuse(std::move(p), input, cm, std::move(done));
    return;
  }
  RunIn(std::move(p), root, input, cm, std::move(done));
}

void CollectiveExecutorImpl::Rebuild(const GroupId& group) {
  GroupRendezvousFn rendezvous;
  GroupAsk ask;
  absl::Duration timeout;
  {
    absl::MutexLock lock(&mu_);
    rendezvous = rendezvous_;
    timeout = rebuild_timeout_;
    ask.group_size = group.size();
    ask.members = group.members;
    ask.tasks = group.tasks;
    ask.last_generation = groups_[group].generation;
    ask.probe = ask.last_generation == 0 && !group.elastic();  // the elastic group never probes
  }
  std::random_device rd;
  ask.nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  const absl::Time start = absl::Now(), deadline = start + timeout;
  absl::Status status;
  GroupAnswer answer;
  std::string last;  // what the last unfinished ask said
  while (true) {
    absl::StatusOr<GroupAnswer> got = rendezvous(ask);
    if (got.ok() && got->done) {
      answer = *got;
      break;
    }
    if (got.ok()) {
      last = absl::StrCat("not joined yet: ", got->missing);
    } else if (absl::IsUnavailable(got.status()) || absl::IsDeadlineExceeded(got.status())) {
      last = absl::StrCat("the coordinator did not answer: ", got.status().message());  // starting or restarting
    } else if (ask.probe && !(absl::IsInvalidArgument(got.status()) && !group.tasks.empty())) {
      // Without the coordinator's word, start as a fresh group: the runs
      // then fail (or not) on their own, naming the peers.
      LOG(WARNING) << "Could not ask the coordinator about the " << GroupName(group) << " (" << got.status().message()
                   << "); starting it in generation 1";
      answer.done = true;
      answer.generation = 1;
      answer.root = 0;
      break;
    } else {
      status = got.status();
      break;
    }
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
    }
    if (stopping) {
      status = absl::CancelledError("this task's collective executor is shutting down");
      break;
    }
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(absl::StrCat("rebuilding the ", GroupName(group), " did not finish within ",
                                                        absl::FormatDuration(timeout), "; ", last));
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::vector<std::function<void(absl::Status)>> waiters;
  {
    absl::MutexLock lock(&mu_);
    Group& g = groups_[group];
    g.asking = false;
    if (status.ok()) {
      g.generation = answer.generation;
      g.root = answer.root;
      g.members = answer.members;
      g.ready = true;
      if (group.elastic() && g.members.empty()) {
        g.ready = false;
        status = absl::InternalError("the coordinator built an elastic group without members");
      }
    }
    waiters.swap(g.waiters);
  }
  if (status.ok() && group.elastic()) {
    LOG(INFO) << "Elastic collective group is in generation " << answer.generation << " with " << answer.members.size()
              << " rank(s) (tasks " << absl::StrJoin(answer.members, ",") << "), rebuilt in "
              << absl::FormatDuration(absl::Now() - start);
  } else if (status.ok()) {
    LOG(INFO) << "C" << GroupName(group).substr(1) << " is in generation " << answer.generation << " (state from rank "
              << answer.root << "), rebuilt in " << absl::FormatDuration(absl::Now() - start);
  }
  for (auto& w : waiters) w(status);
}

void CollectiveExecutorImpl::WatchRuns() {
  while (true) {
    std::map<std::pair<GroupId, int64_t>, std::vector<std::weak_ptr<CollectiveChannel>>> old;
    GroupRendezvousFn rendezvous;
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || inflight_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Seconds(1));
      if (stopping_ || inflight_.empty()) {
        watching_ = false;
        return;
      }
      const absl::Time now = absl::Now();
      for (const auto& [id, run] : inflight_) {
        if (now - run.start >= absl::Seconds(1)) old[{run.group, run.generation}].push_back(run.channel);
      }
      rendezvous = rendezvous_;
    }
    for (auto& [group, channels] : old) {
      GroupAsk ask;
      ask.group_size = group.first.size();
      ask.members = group.first.members;
      ask.tasks = group.first.tasks;
      ask.last_generation = group.second;
      ask.query = true;
      absl::StatusOr<GroupAnswer> got = rendezvous(ask);
      if (!got.ok() || got->waiting.empty()) continue;
      const absl::Status why = absl::UnavailableError(
          absl::StrCat("the group has moved on: ", got->waiting, " left generation ", group.second,
                       " after a failure and wait(s) to rebuild the group, so this run cannot finish"));
      for (auto& weak : channels) {
        if (std::shared_ptr<CollectiveChannel> ch = weak.lock()) ch->Abort(why);
      }
    }
  }
}

void CollectiveExecutorImpl::RunIn(CollectiveParams params, int root, const Tensor& input, CancellationManager* cm,
                                   DoneCallback done, std::shared_ptr<CollectiveChannel> given, int64_t given_seq) {
  uint64_t run_id = 0;
  // The group's key: its members, or none for the elastic group.
  const GroupId group = GroupOf(params);
  if (params.group_size > 1) {
    {
      absl::MutexLock lock(&mu_);
      if (rendezvous_) run_id = next_run_++;
    }
    done = [this, group, gen = params.generation, run_id, done = std::move(done)](absl::StatusOr<Tensor> r) {
      if (!r.ok()) RunFailed(group, gen);
      if (run_id != 0) {
        absl::MutexLock lock(&mu_);
        inflight_.erase(run_id);
      }
      done(std::move(r));
    };
  }
  const int64_t seq = given != nullptr ? given_seq : NextSeq(params.generation, params.group_key, params.instance_key);
  absl::StatusOr<std::shared_ptr<CollectiveChannel>> opened =
      given != nullptr ? absl::StatusOr<std::shared_ptr<CollectiveChannel>>(std::move(given))
                       : transport_->Open(params, seq);
  if (!opened.ok()) {
    done(absl::Status(opened.status().code(),
                      absl::StrCat(DescribeCollective(params), ": ", opened.status().message())));
    return;
  }
  auto end = std::make_shared<RunEnd>();
  end->what = absl::StrCat(DescribeCollective(params), ", run ", seq, " on ", (*opened)->RankName((*opened)->rank()));
  end->done = std::move(done);
  // In the ring (and Adasum) a rank hears from only some others: announce
  // the run so that the stall check can name every rank that has not joined.
  Announce announce = Announce::kNone;
  if (params.kind == CollectiveKind::kReduce && params.merge_op == MergeOp::kAdasum) {
    announce = Announce::kAll;
  } else if (params.kind == CollectiveKind::kReduce && AllReduceUsesRing(input, params.group_size)) {
    announce = Announce::kRing;
  }
  end->observer = std::make_shared<RunObserver>(params, (*opened)->size());
  std::shared_ptr<CollectiveChannel> raw = end->observer->CountBytes(std::move(*opened));
  if (params.kind == CollectiveKind::kReduce) {
    // Below the stall check and fp16, so that the first message each peer
    // receives, whatever sends it, carries this rank's signature.
    raw = MakeShapeCheckedChannel(
        std::move(raw),
        ReduceSignature{input.dtype(), input.shape(), params.merge_op,
                        params.compress_fp16 && (input.dtype() == DT_FLOAT || input.dtype() == DT_DOUBLE)});
  }
  WatchedChannel watched = WatchForStalls(std::move(raw), end->what, stall_check_, announce);
  std::shared_ptr<CollectiveChannel> ch = end->observer->WatchPhases(std::move(watched.channel));
  end->stop_stall_check = std::move(watched.stop);
  if (cm != nullptr) {
    end->cm = cm;
    // The abort carries the step's first error to the peers: the run they
    // wait on ends because of it, and their errors must name its culprit.
    end->token = cm->Register([ch, end] { ch->Abort(StepCancelledError(end->what, end->cm)); });
    if (end->token == CancellationManager::kInvalidToken) {
      // The peers have opened this run too: they must not wait for it.
      ch->Abort(StepCancelledError(end->what, cm));
      end->Finish(StepCancelledError("not started", cm));
      return;
    }
  }
  if (params.timeout_seconds > 0) {
    end->timer = Timer::Global()->After(absl::Seconds(params.timeout_seconds), [ch, end, t = params.timeout_seconds] {
      end->timer_fired = true;
      ch->Abort(absl::DeadlineExceededError(absl::StrCat(end->what, ": not finished after timeout_seconds=", t,
                                                         "; a rank of the group did not join or stopped")));
    });
  }
  if (run_id != 0) {
    absl::MutexLock lock(&mu_);
    inflight_[run_id] = InFlight{group, params.generation, ch, absl::Now()};
    if (!watching_ && !stopping_) {
      watching_ = true;
      pool_->Schedule([this] { WatchRuns(); });
    }
  }
  auto tensor_done = [end](absl::StatusOr<Tensor> r) { end->Finish(std::move(r)); };
  switch (params.kind) {
    case CollectiveKind::kReduce: {
      Tensor buf = input.DeepCopy();
      if (params.merge_op == MergeOp::kAdasum) {
        if (params.compress_fp16) {
          end->Finish(absl::InvalidArgumentError(
              "merge_op Adasum does not take compression fp16 (Horovod's Adasum does not either); use none"));
          return;
        }
        AdasumAllReduce(ch, buf, [buf, end, final_op = params.final_op, n = params.group_size](absl::Status s) mutable {
          if (s.ok()) s = ApplyFinal(final_op, n, &buf);
          if (!s.ok()) {
            end->Finish(s);
            return;
          }
          end->Finish(buf);
        });
        return;
      }
      const bool fp16 = params.compress_fp16 && (input.dtype() == DT_FLOAT || input.dtype() == DT_DOUBLE);
      if (fp16) {
        RoundToHalf(&buf);  // Horovod's cast to float16 before the all-reduce
        ch = MakeFp16Channel(ch, input.dtype());
      }
      AllReduce(ch, buf, params.merge_op, params.final_op, [buf, end, fp16](absl::Status s) mutable {
        if (!s.ok()) {
          end->Finish(s);
          return;
        }
        // The owner of a ring segment finished it in full precision; the
        // others received it rounded: round here so every rank holds the
        // same fp16 values.
        if (fp16) RoundToHalf(&buf);
        end->Finish(buf);
      });
      return;
    }
    case CollectiveKind::kBroadcastSend: {
      bool sends = !params.from_group_root || ch->rank() == root;
      if (params.root_rank >= 0) {
        if (params.root_rank >= ch->size()) {
          // Every rank runs this op with the same root_rank and group: all fail alike.
          const absl::Status s = absl::InvalidArgumentError(absl::StrCat(end->what, ": root_rank ", params.root_rank,
                                                                         " is not a rank of the group of size ",
                                                                         ch->size(), " (0..", ch->size() - 1, ")"));
          ch->Abort(s);
          end->Finish(s);
          return;
        }
        sends = ch->rank() == params.root_rank;
      }
      Broadcast(ch, sends, input, input.dtype(), input.shape(), tensor_done);
      return;
    }
    case CollectiveKind::kBroadcastRecv:
      Broadcast(ch, false, Tensor(), params.dtype, params.shape, tensor_done);
      return;
    case CollectiveKind::kGather:
      AllGather(ch, input, tensor_done);
      return;
  }
}

}  // namespace distflow
