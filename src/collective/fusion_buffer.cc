#include "collective/fusion_buffer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "distflow/step_stats.h"

namespace distflow {
namespace {

constexpr char kPlanTag[] = "fusion-plan";

}  // namespace

int64_t FusionInstanceKey(const CollectiveParams& p) {
  // FNV-1a over what makes a stream, folded into the negative keys.
  uint64_t h = 1469598103934665603ull;
  const int64_t cycle_us = static_cast<int64_t>(p.fusion_cycle_ms * 1000);
  for (int64_t v : {static_cast<int64_t>(p.dtype), static_cast<int64_t>(p.merge_op), static_cast<int64_t>(p.final_op),
                    static_cast<int64_t>(p.compress_fp16), cycle_us, p.fusion_threshold_bytes, p.fusion_set_size}) {
    for (int b = 0; b < 8; ++b) {
      h ^= (static_cast<uint64_t>(v) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return -1 - static_cast<int64_t>(h >> 2);
}

bool UsesCycleFusion(const CollectiveParams& p) {
  return p.kind == CollectiveKind::kReduce && p.fusion_cycle_ms > 0 && p.merge_op != MergeOp::kAdasum &&
         p.group_size != 1;
}

Tensor EncodePlan(const std::vector<PlannedTensor>& plan) {
  Tensor t(DT_INT64, TensorShape({static_cast<int64_t>(2 * plan.size())}));
  auto flat = t.flat<int64_t>();
  for (size_t i = 0; i < plan.size(); ++i) {
    flat[2 * i] = plan[i].instance_key;
    flat[2 * i + 1] = plan[i].elements;
  }
  return t;
}

absl::StatusOr<std::vector<PlannedTensor>> DecodePlan(const Tensor& t) {
  if (t.dtype() != DT_INT64 || t.shape().dims() != 1 || t.NumElements() < 2 || t.NumElements() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a fusion plan is int64 [key, elements, ...] pairs, got ",
                                                   DataTypeName(t.dtype()), " ", t.shape().DebugString()));
  }
  std::vector<PlannedTensor> plan;
  auto flat = t.flat<int64_t>();
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    if (flat[i + 1] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a fusion plan gives instance ", flat[i], " ", flat[i + 1], " elements"));
    }
    plan.push_back(PlannedTensor{flat[i], flat[i + 1]});
  }
  return plan;
}

FusionBuffer::FusionBuffer(CollectiveParams stream, int64_t first_flush, Timer* timer, Hooks hooks)
    : stream_(std::move(stream)),
      timer_(timer),
      hooks_(std::move(hooks)),
      cycle_us_(std::max<int64_t>(1, static_cast<int64_t>(stream_.fusion_cycle_ms * 1000))),
      threshold_(stream_.fusion_threshold_bytes),
      set_size_(stream_.fusion_set_size),
      next_flush_(first_flush) {}

FusionBuffer::~FusionBuffer() = default;

bool FusionBuffer::failed() {
  absl::MutexLock lock(&mu_);
  return !failure_.ok();
}

int64_t FusionBuffer::next_flush() {
  absl::MutexLock lock(&mu_);
  return failure_.ok() ? next_flush_ : resume_;
}

void FusionBuffer::Release(const EntryPtr& e) {
  if (e->cm != nullptr && e->token != CancellationManager::kInvalidToken) e->cm->Deregister(e->token);
  e->token = CancellationManager::kInvalidToken;
  if (e->timeout != 0) Timer::Global()->Cancel(e->timeout);
  e->timeout = 0;
}

void FusionBuffer::Add(const CollectiveParams& params, const Tensor& input, CancellationManager* cm,
                       DoneCallback done) {
  auto e = std::make_shared<Entry>();
  e->params = params;
  e->input = input;
  e->cm = cm;
  e->done = std::move(done);
  std::weak_ptr<FusionBuffer> weak = weak_from_this();
  if (cm != nullptr) {
    // The buffer's runs fail with the step's first error, which reaches
    // the peers (see StepCancelledError).
    e->token = cm->Register([weak, what = DescribeCollective(params), cm] {
      if (auto self = weak.lock()) self->Fail(StepCancelledError(what, cm));
    });
    if (e->token == CancellationManager::kInvalidToken) {
      e->done(StepCancelledError(absl::StrCat(DescribeCollective(params), ", not started"), cm));
      return;
    }
  }
  if (params.timeout_seconds > 0) {
    e->timeout = Timer::Global()->After(
        absl::Seconds(params.timeout_seconds), [weak, what = DescribeCollective(params), t = params.timeout_seconds] {
          if (auto self = weak.lock()) {
            self->Fail(absl::DeadlineExceededError(
                absl::StrCat(what, " was not reduced after timeout_seconds=", t,
                             " while waiting to be fused; a rank of the group did not join or stopped")));
          }
        });
  }
  Actions a;
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) {
      refused = true;
      a.fail = failure_;
    } else if (absl::Status s = EnsureChannel(); !s.ok()) {
      refused = true;
      a.fail = s;
    } else if (rank_ == 0) {
      const int64_t bytes = static_cast<int64_t>(input.TotalBytes());
      if (!pending_.empty() && threshold_ > 0 && pending_bytes_ + bytes > threshold_) PlanPending(&a);
      pending_.push_back(e);
      pending_bytes_ += bytes;
      const bool set_complete = set_size_ > 0 && ++set_arrivals_ >= set_size_;
      if (set_complete) set_arrivals_ = 0;
      if ((threshold_ > 0 && pending_bytes_ >= threshold_) || set_complete) {
        PlanPending(&a);
      } else if (cycle_timer_ == 0) {
        const uint64_t cycle = cycle_;
        cycle_timer_ = timer_->After(absl::Microseconds(cycle_us_), [weak, cycle] {
          if (auto self = weak.lock()) self->OnCycle(cycle);
        });
      }
    } else if (!Claim(e, &a)) {
      unclaimed_[params.instance_key].push_back(e);
      ++num_unclaimed_;
      MaybeAskForPlan(&a);
    }
  }
  if (refused) {
    Release(e);
    e->done(absl::Status(a.fail.code(), absl::StrCat(DescribeCollective(params), ": ", a.fail.message())));
    return;
  }
  Do(std::move(a));
}

absl::Status FusionBuffer::EnsureChannel() {
  if (open_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<CollectiveChannel>> ch = hooks_.open(next_flush_);
  if (!ch.ok()) return ch.status();
  open_ = std::move(*ch);
  rank_ = open_->rank();
  return absl::OkStatus();
}

void FusionBuffer::PlanPending(Actions* a) {
  if (pending_.empty()) return;
  if (cycle_timer_ != 0) timer_->Cancel(cycle_timer_);
  cycle_timer_ = 0;
  ++cycle_;
  if (absl::Status s = EnsureChannel(); !s.ok()) {
    a->fail = s;  // the pending tensors fail with the buffer
    return;
  }
  auto f = std::make_shared<Flush>();
  f->k = next_flush_++;
  f->ch = std::move(open_);
  open_ = nullptr;
  for (const EntryPtr& e : pending_) {
    f->plan.push_back(PlannedTensor{e->params.instance_key, e->input.NumElements()});
    f->entries.push_back(e);
  }
  pending_.clear();
  pending_bytes_ = 0;
  running_[f->k] = std::make_shared<CancellationManager>();
  a->start.push_back(std::move(f));
}

void FusionBuffer::OnCycle(uint64_t cycle) {
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (cycle != cycle_ || !failure_.ok()) return;
    cycle_timer_ = 0;
    PlanPending(&a);
  }
  // The timer's thread is shared: the fused reduction starts elsewhere.
  hooks_.schedule([self = shared_from_this(), a = std::move(a)]() mutable { self->Do(std::move(a)); });
}

void FusionBuffer::MaybeAskForPlan(Actions* a) {
  if (asking_ || num_unclaimed_ == 0 || !failure_.ok()) return;
  if (absl::Status s = EnsureChannel(); !s.ok()) {
    a->fail = s;
    return;
  }
  asking_ = true;
  a->ask_k = next_flush_++;
  a->ask_ch = std::move(open_);
  open_ = nullptr;
  asked_.push_back(a->ask_ch);
}

void FusionBuffer::Fill(const FlushPtr& f, size_t i, const EntryPtr& e, Actions* a) {
  const PlannedTensor& want = f->plan[i];
  if (e->input.NumElements() != want.elements) {
    a->fail = absl::InvalidArgumentError(
        absl::StrCat("rank 0 planned instance ", want.instance_key, " with ", want.elements,
                     " elements in fused reduction ", f->k, ", but here ", DescribeCollective(e->params), " has ",
                     e->input.NumElements(), " (", e->input.shape().DebugString(), "): the ranks' graphs differ"));
    // The entry is failed with the rest of the buffer.
    unclaimed_[e->params.instance_key].push_front(e);
    ++num_unclaimed_;
    return;
  }
  f->entries[i] = e;
  if (--f->missing == 0) {
    waiting_.erase(f->k);
    running_[f->k] = std::make_shared<CancellationManager>();
    a->start.push_back(f);
  }
}

bool FusionBuffer::Claim(const EntryPtr& e, Actions* a) {
  auto it = claims_.find(e->params.instance_key);
  if (it == claims_.end() || it->second.empty()) return false;
  auto [f, i] = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) claims_.erase(it);
  Fill(f, i, e, a);
  return true;
}

void FusionBuffer::OnPlan(int64_t k, std::shared_ptr<CollectiveChannel> ch, absl::Status s, Tensor t) {
  absl::StatusOr<std::vector<PlannedTensor>> plan =
      s.ok() ? DecodePlan(t) : absl::StatusOr<std::vector<PlannedTensor>>(s);
  if (!plan.ok()) {
    Fail(absl::Status(plan.status().code(),
                      absl::StrCat("waiting for rank 0's plan of fused reduction ", k, ": ", plan.status().message())));
    return;
  }
  Actions a;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    asking_ = false;
    asked_.erase(std::remove(asked_.begin(), asked_.end(), ch), asked_.end());
    auto f = std::make_shared<Flush>();
    f->k = k;
    f->ch = std::move(ch);
    f->plan = std::move(*plan);
    f->entries.resize(f->plan.size());
    f->missing = f->plan.size();
    waiting_[k] = f;
    for (size_t i = 0; i < f->plan.size() && a.fail.ok(); ++i) {
      auto it = unclaimed_.find(f->plan[i].instance_key);
      if (it == unclaimed_.end() || it->second.empty()) {
        claims_[f->plan[i].instance_key].emplace_back(f, i);
        continue;
      }
      EntryPtr e = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) unclaimed_.erase(it);
      --num_unclaimed_;
      Fill(f, i, e, &a);
    }
    if (a.fail.ok()) MaybeAskForPlan(&a);
  }
  Do(std::move(a));
}

void FusionBuffer::Do(Actions a) {
  if (!a.fail.ok()) {
    Fail(a.fail);
    for (FlushPtr& f : a.start) {  // planned, never started: its peers must not wait for it
      f->ch->Abort(a.fail);
      Finish(f, a.fail);
    }
    return;
  }
  if (a.ask_ch != nullptr) {
    std::weak_ptr<FusionBuffer> weak = weak_from_this();
    a.ask_ch->RecvAsync(0, kPlanTag, [weak, k = a.ask_k, ch = a.ask_ch](absl::Status s, Tensor t) {
      if (auto self = weak.lock()) self->OnPlan(k, ch, std::move(s), std::move(t));
    });
  }
  for (FlushPtr& f : a.start) Start(std::move(f));
}

void FusionBuffer::Start(FlushPtr f) {
  std::shared_ptr<CancellationManager> cm;
  int rank = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(f->k);
    DF_CHECK(it != running_.end()) << "fused reduction " << f->k << " started twice";
    cm = it->second;
    rank = rank_;
  }
  if (cm->IsCancelled()) {  // the buffer failed before this flush started
    f->ch->Abort(cm->reason());
    Finish(f, cm->reason());
    return;
  }
  if (rank == 0) {
    // The plan goes first: every other rank learns from it what to fuse.
    const Tensor plan = EncodePlan(f->plan);
    for (int r = 1; r < f->ch->size(); ++r) {
      if (absl::Status s = f->ch->Send(r, kPlanTag, plan); !s.ok()) {
        Finish(f, s);
        return;
      }
    }
  }
  int64_t total = 0;
  double timeout = 0;
  std::string names;
  for (const EntryPtr& e : f->entries) {
    total += e->input.NumElements();
    if (e->params.timeout_seconds > 0 && (timeout == 0 || e->params.timeout_seconds < timeout)) {
      timeout = e->params.timeout_seconds;
    }
    if (e->timeout != 0) Timer::Global()->Cancel(e->timeout);  // the run's own timeout holds now
    e->timeout = 0;
  }
  Tensor buf(stream_.dtype, TensorShape({total}));
  char* out = static_cast<char*>(buf.raw_data());
  for (const EntryPtr& e : f->entries) {
    std::memcpy(out, e->input.raw_data(), e->input.TotalBytes());
    out += e->input.TotalBytes();
  }
  f->start_us = Env::Default()->NowMicros();
  CollectiveParams p = stream_;
  const EntryPtr& first = f->entries.front();
  p.node_name = f->entries.size() == 1
                    ? absl::StrCat("fusion of ", first->params.node_name)
                    : absl::StrCat("fusion of ", first->params.node_name, " and ", f->entries.size() - 1, " more");
  p.timeout_seconds = timeout;
  p.trace = first->params.trace;
  hooks_.run(std::move(p), f->ch, f->k, std::move(buf), cm.get(),
             [self = shared_from_this(), f, cm](absl::StatusOr<Tensor> r) { self->Finish(f, std::move(r)); });
}

void FusionBuffer::Finish(const FlushPtr& f, absl::StatusOr<Tensor> result) {
  {
    absl::MutexLock lock(&mu_);
    running_.erase(f->k);
  }
  if (const auto& trace = f->entries.front()->params.trace; trace && f->start_us > 0) {
    NodeExecStats record;
    record.node = absl::StrCat("fused reduction ", f->k, ":");
    for (size_t i = 0; i < f->entries.size(); ++i) {
      absl::StrAppend(&record.node, i == 0 ? " " : ", ", f->entries[i]->params.node_name);
    }
    record.op = kCollectiveFusionOp;
    record.start_us = f->start_us;
    record.end_us = std::max(Env::Default()->NowMicros(), f->start_us);
    trace(record);
  }
  if (!result.ok()) {
    Fail(result.status());
    const size_t others = f->entries.size() - 1;
    for (const EntryPtr& e : f->entries) {
      Release(e);
      e->done(absl::Status(result.status().code(), absl::StrCat(DescribeCollective(e->params), ": fused with ", others,
                                                                " other reduction(s): ", result.status().message())));
    }
    return;
  }
  const char* in = static_cast<const char*>(result->raw_data());
  for (const EntryPtr& e : f->entries) {
    Tensor out(e->input.dtype(), e->input.shape());
    std::memcpy(out.raw_data(), in, out.TotalBytes());
    in += out.TotalBytes();
    Release(e);
    e->done(std::move(out));
  }
}

void FusionBuffer::Fail(const absl::Status& status) {
  std::vector<EntryPtr> dead;
  std::vector<std::shared_ptr<CollectiveChannel>> channels;
  std::vector<std::shared_ptr<CancellationManager>> runs;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = status.ok() ? absl::InternalError("fusion buffer failed") : status;
    resume_ = next_flush_ + (open_ != nullptr ? 1 : 0);
    if (cycle_timer_ != 0) timer_->Cancel(cycle_timer_);
    cycle_timer_ = 0;
    for (EntryPtr& e : pending_) dead.push_back(std::move(e));
    pending_.clear();
    for (auto& [key, q] : unclaimed_)
      for (EntryPtr& e : q) dead.push_back(std::move(e));
    unclaimed_.clear();
    num_unclaimed_ = 0;
    claims_.clear();
    for (auto& [k, f] : waiting_) {
      for (EntryPtr& e : f->entries)
        if (e != nullptr) dead.push_back(std::move(e));
      channels.push_back(f->ch);
    }
    waiting_.clear();
    for (auto& ch : asked_) channels.push_back(ch);
    asked_.clear();
    if (open_ != nullptr) channels.push_back(std::move(open_));
    open_ = nullptr;
    for (auto& [k, cm] : running_) runs.push_back(cm);
  }
  if (hooks_.failed) hooks_.failed(status);
  for (auto& ch : channels) ch->Abort(status);
  for (auto& cm : runs) cm->StartCancel(status);
  for (const EntryPtr& e : dead) {
    Release(e);
    e->done(absl::Status(status.code(), absl::StrCat(DescribeCollective(e->params), ": ", status.message())));
  }
}

}  // namespace distflow
