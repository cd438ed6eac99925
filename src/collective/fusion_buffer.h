// FusionBuffer: Horovod's cycle time, at run time. The CollectiveReduce ops
// that carry fusion_cycle_ms > 0 (one per gradient, AllReduceGradients with
// a cycle time) do not reduce alone: the executor hands each to the buffer
// of its stream (its group and generation, dtype, merge and final op,
// compression, cycle and threshold), which reduces the tensors that became
// ready together in one fused reduction and gives each op back its slice.
//
// Which tensors go together is decided by rank 0 of the group alone, so every
// rank runs the same fused reductions without a coordinator round trip: a
// flush on rank 0 takes the tensors it holds that arrived within one cycle
// of the first of them (fewer when their bytes would pass the threshold;
// at once when the last of the graph's set_size tensors of the stream came:
// nothing else of the step can come), in arrival order. Flush k is run k of the stream's own
// instance (FusionInstanceKey); its first message to every rank is the plan,
// the instance keys and element counts of its tensors in order. Every other
// rank, as soon as it holds a tensor of the stream, waits for the next plan,
// takes the tensors it names (waiting for those it has not computed yet: it
// runs the same graph, and rank 0 plans only tensors it holds, so none
// depends on a later reduction), and runs the same fused reduction. The k-th
// occurrence of an instance key on one rank pairs with the k-th on every
// other, as unfused runs pair by count.
//
// A failure of a flush (a peer died, the step was cancelled, a plan did not
// arrive) fails every op waiting in the buffer and every flush in flight, and
// the buffer is done: the executor starts a new one for later ops (and, with
// a coordinator, the group is rebuilt in a new generation).
//
// Thread-safe. Owned by shared_ptr; its callbacks keep it alive.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/cancellation.h"
#include "base/timer.h"
#include "collective/transport.h"
#include "kernels/collective.h"

namespace distflow {

// The op of the trace record each fused reduction leaves in the step of its
// first tensor: {node: "fused reduction K: a, b, c", op: "CollectiveFusion"}
// from its start to its end on this rank.
inline constexpr char kCollectiveFusionOp[] = "CollectiveFusion";

// The instance key of a fusion stream's flushes: negative (apart from the
// keys graphs use), the same on every rank for the same stream.
int64_t FusionInstanceKey(const CollectiveParams& p);
// Whether the executor fuses `p` at run time: a CollectiveReduce with a
// cycle time, element-wise (not Adasum), in a group of more than one.
bool UsesCycleFusion(const CollectiveParams& p);

// One planned tensor: its op's instance key and its number of elements.
struct PlannedTensor {
  int64_t instance_key = 0;
  int64_t elements = 0;
};
// The plan as it travels: int64 [key, elements, key, elements, ...].
Tensor EncodePlan(const std::vector<PlannedTensor>& plan);
// InvalidArgument naming what is wrong with a plan from the network.
absl::StatusOr<std::vector<PlannedTensor>> DecodePlan(const Tensor& t);

class FusionBuffer : public std::enable_shared_from_this<FusionBuffer> {
 public:
  using DoneCallback = CollectiveExecutor::DoneCallback;
  struct Hooks {
    // The transport's channel for flush `k` of the stream.
    std::function<absl::StatusOr<std::shared_ptr<CollectiveChannel>>(int64_t k)> open;
    // Runs the fused reduction `params` of `input` as flush `k` on `ch`
    // (the channel `open` gave, the plan already through it), cancelled by
    // `cm`; calls `done` once.
    std::function<void(CollectiveParams params, std::shared_ptr<CollectiveChannel> ch, int64_t k, Tensor input,
                       CancellationManager* cm, DoneCallback done)>
        run;
    // Runs `fn` soon on another thread (the cycle timer's flushes start there).
    std::function<void(std::function<void()> fn)> schedule;
    // The buffer failed with `status` (called once, before the ops hear).
    std::function<void(const absl::Status& status)> failed;
  };
  // `stream`: the params the fused runs take (instance_key the stream's);
  // flushes are numbered from `first_flush`. `timer` runs the cycle.
  FusionBuffer(CollectiveParams stream, int64_t first_flush, Timer* timer, Hooks hooks);
  ~FusionBuffer();

  // One op's tensor for the stream; `done` gets its reduced value.
  void Add(const CollectiveParams& params, const Tensor& input, CancellationManager* cm, DoneCallback done);
  // Fails everything waiting and in flight. Idempotent.
  void Fail(const absl::Status& status);
  bool failed();
  // The flush the next plan will be (for a successor after a failure).
  int64_t next_flush();

 private:
  struct Entry {
    CollectiveParams params;
    Tensor input;
    CancellationManager* cm = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    Timer::Id timeout = 0;
    DoneCallback done;
  };
  using EntryPtr = std::shared_ptr<Entry>;
  // A plan this rank runs: its tensors in order, filled as they arrive.
  struct Flush {
    int64_t k = 0;
    std::shared_ptr<CollectiveChannel> ch;
    std::vector<PlannedTensor> plan;
    std::vector<EntryPtr> entries;  // null: not here yet
    size_t missing = 0;
    int64_t start_us = 0;  // when its reduction started here
  };
  using FlushPtr = std::shared_ptr<Flush>;
  // What a change of state asks for, done once mu_ is released (a receive
  // may call back on the calling thread).
  struct Actions {
    std::vector<FlushPtr> start;
    int64_t ask_k = -1;  // >= 0: receive the plan of this flush on ask_ch
    std::shared_ptr<CollectiveChannel> ask_ch;
    absl::Status fail;
  };

  // Opens the channel of next_flush_ if not yet (learns the rank).
  absl::Status EnsureChannel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rank 0: plans what is pending as flush next_flush_ into a->start.
  void PlanPending(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnCycle(uint64_t cycle);
  // Others: asks for the next plan if a tensor waits for one.
  void MaybeAskForPlan(Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Do(Actions a);
  void OnPlan(int64_t k, std::shared_ptr<CollectiveChannel> ch, absl::Status s, Tensor t);
  // Puts `e` into the oldest received plan waiting for its key (false if
  // none waits); a plan that is now full goes to a->start.
  bool Claim(const EntryPtr& e, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places `e` in slot `i` of `f` if the sizes agree (else a->fail).
  void Fill(const FlushPtr& f, size_t i, const EntryPtr& e, Actions* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Start(FlushPtr flush);
  void Finish(const FlushPtr& flush, absl::StatusOr<Tensor> result);
  static void Release(const EntryPtr& e);

  const CollectiveParams stream_;
  Timer* const timer_;
  const Hooks hooks_;
  const int64_t cycle_us_;
  const int64_t threshold_;
  const int64_t set_size_;

  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int rank_ ABSL_GUARDED_BY(mu_) = -1;  // -1: no channel opened yet
  int64_t next_flush_ ABSL_GUARDED_BY(mu_);
  int64_t resume_ ABSL_GUARDED_BY(mu_) = 0;                       // after a failure: past every flush opened
  std::shared_ptr<CollectiveChannel> open_ ABSL_GUARDED_BY(mu_);  // flush next_flush_'s, once opened
  // Rank 0: the tensors arrived and not yet planned, in arrival order.
  std::vector<EntryPtr> pending_ ABSL_GUARDED_BY(mu_);
  int64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t set_arrivals_ ABSL_GUARDED_BY(mu_) = 0;  // since the set was last complete
  uint64_t cycle_ ABSL_GUARDED_BY(mu_) = 0;        // which pending set a timer belongs to
  Timer::Id cycle_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // Others: tensors no plan has named yet, by instance key in arrival
  // order, and the slots of received plans still waiting for a tensor.
  std::map<int64_t, std::deque<EntryPtr>> unclaimed_ ABSL_GUARDED_BY(mu_);
  size_t num_unclaimed_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, std::deque<std::pair<FlushPtr, size_t>>> claims_ ABSL_GUARDED_BY(mu_);
  bool asking_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<CollectiveChannel>> asked_ ABSL_GUARDED_BY(mu_);  // channels waiting on a plan
  // Flushes planned or running, with the cancellation of their runs.
  std::map<int64_t, std::shared_ptr<CancellationManager>> running_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, FlushPtr> waiting_ ABSL_GUARDED_BY(mu_);  // received plans not yet full
};

}  // namespace distflow
