// Running one step of a MasterSession: an asynchronous RunGraph on every
// partition's WorkerInterface (its own task's first), aborted everywhere on
// the first error, answered from the last awaited partition's completion.
#include <atomic>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "master/master_session_impl.h"
#include "rpc/step_stats_proto.h"
#include "rpc/step_tensor_codec.h"
#include "rpc/worker_cache_interface.h"

namespace distflow {
namespace {

// How long Close lets the registrations in flight end by themselves.
constexpr absl::Duration kRegistrationGraceOnClose = absl::Seconds(2);

}  // namespace

void MasterSessionImpl::RunOnceAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp, ThreadPool* pool,
                                     std::function<void(absl::Status)> done) {
  auto st = std::make_shared<StepState>();
  st->started = st->logged = Now();
  st->req = req;
  st->resp = resp;
  st->pool = pool;
  // A failed step frees the bytes its client put for it on our bulk port.
  st->done = [this, req, done = std::move(done)](absl::Status s) {
    if (!s.ok()) ReleaseBulkFeeds(bulk_, *req);
    done(s);
  };
  std::vector<TensorId> feeds, fetches;
  std::vector<std::string> targets(req->target().begin(), req->target().end());
  std::vector<std::string> feed_keys;
  for (const proto::NamedTensor& f : req->feed()) {
    absl::StatusOr<TensorId> id = ParseTensorId(f.name());
    if (!id.ok()) return st->done(id.status());
    std::string canon = absl::StrCat(id->node, ":", id->index);
    if (!st->feed_values.emplace(canon, &f.tensor()).second) {
      return st->done(absl::InvalidArgumentError(absl::StrCat("Tensor '", canon, "' is fed twice")));
    }
    absl::StatusOr<std::optional<Tensor>> bulk_feed = TakeBulkFeed(bulk_, f, canon, local_task_);
    if (!bulk_feed.ok()) return st->done(bulk_feed.status());
    if (bulk_feed->has_value()) st->bulk_feeds[canon] = std::move(**bulk_feed);
    feeds.push_back(*id);
    feed_keys.push_back(canon);
  }
  for (const std::string& f : req->fetch()) {
    absl::StatusOr<TensorId> id = ParseTensorId(f);
    if (!id.ok()) return st->done(id.status());
    fetches.push_back(*id);
    st->fetch_keys.push_back(absl::StrCat(id->node, ":", id->index));
  }
  std::string key = absl::StrCat(absl::StrJoin(feed_keys, ","), "->", absl::StrJoin(st->fetch_keys, ","), "/",
                                 absl::StrJoin(targets, ","));
  {
    absl::MutexLock lock(&mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) st->plan = it->second;
  }
  if (st->plan != nullptr) {
    StartStep(st);
    return;
  }
  // First step of this signature: placing, partitioning and registering
  // make blocking RPCs, so they run on the master's pool.
  pool->Schedule([this, st, feeds = std::move(feeds), fetches = std::move(fetches), targets = std::move(targets),
                  key = std::move(key)] {
    absl::StatusOr<std::shared_ptr<Plan>> plan = GetPlan(feeds, fetches, targets, key);
    if (!plan.ok()) return st->done(plan.status());
    st->plan = std::move(*plan);
    StartStep(st);
  });
}

void MasterSessionImpl::StartStep(const std::shared_ptr<StepState>& st) {
  st->step_id = RandomStepId();
  const int64_t timeout = st->req->timeout_ms() > 0 ? st->req->timeout_ms() : config_.operation_timeout_ms();
  for (auto& [device, pp] : st->plan->parts) {
    auto c = std::make_unique<StepState::Call>();
    c->task = pp.task;
    absl::StatusOr<std::shared_ptr<WorkerInterface>> worker = workers_->GetWorker(pp.task);
    if (!worker.ok()) return st->done(worker.status());
    c->worker = std::move(*worker);
    // A traced step waits for every partition, to gather all their records.
    c->only_sends = pp.only_sends && !st->req->trace();
    RunGraphCall& rc = c->run;
    rc.graph_handle = pp.handle;
    rc.step_id = st->step_id;
    rc.timeout_ms = timeout;
    rc.master_task = local_task_;
    rc.trace = st->req->trace();
    for (const std::string& f : pp.partition.feeds) {
      absl::StatusOr<Tensor> t = st->FeedTensor(f);
      if (!t.ok()) {
        return st->done(absl::InvalidArgumentError(absl::StrCat("Feed '", f, "': ", t.status().message())));
      }
      rc.send.emplace_back(f, std::move(*t));
    }
    rc.recv_keys = pp.partition.fetches;
    rc.targets = pp.partition.targets;
    st->calls.push_back(std::move(c));
  }
  int awaited = 0;
  for (auto& c : st->calls) awaited += c->only_sends ? 0 : 1;
  if (awaited == 0) {
    // Cannot happen for a partitioned step (someone receives what is sent);
    // wait for everything rather than answer early.
    for (auto& c : st->calls) c->only_sends = false;
    awaited = static_cast<int>(st->calls.size());
  }
  {
    absl::MutexLock lock(&st->mu);
    st->remaining = awaited;
    st->unreported = static_cast<int>(st->calls.size());
  }
  // A step with nothing to run (no fetches, no targets) ends here; it is
  // never active (no partition would report its end and remove it).
  if (st->calls.empty()) return FinishStep(st);
  {
    absl::MutexLock lock(&active_mu_);
    if (refuse_steps_) return st->done(ClosedError());
    active_.emplace(st.get(), st);
  }
  // Once the last call is issued a completion may finish the step and free
  // `st`'s owner; `keep` holds it until this loop ends.
  // This task's own partition starts first: its cheap nodes run right here
  // and issue their RecvTensor calls, so a peer that gets RecvTensor and
  // RunGraph together answers both in one write.
  std::shared_ptr<StepState> keep = st;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < keep->calls.size(); ++i) {
      StepState::Call* c = keep->calls[i].get();
      if ((c->task == local_task_) != (pass == 0)) continue;
      c->worker->RunGraphAsync(&c->opts, &c->run, [this, keep, c](absl::Status s) { PartitionDone(keep, c, s); });
    }
  }
}

void MasterSessionImpl::PartitionDone(const std::shared_ptr<StepState>& st, StepState::Call* c,
                                      const absl::Status& result) {
  bool abort = false, last = false, late = false;
  absl::Status why;
  {
    absl::MutexLock lock(&st->mu);
    c->returned = true;
    if (!result.ok() && st->answered) {
      // A partition that only sends failed after its consumers received
      // everything: the step's answer stands.
      late = st->first_error.ok();
    } else if (!result.ok()) {
      absl::Status e = result;
      if (!absl::StrContains(e.message(), c->task)) {
        e = absl::Status(e.code(), absl::StrCat("[", c->task, "] ", e.message()));
      }
      // A cancellation is a consequence; keep the root cause.
      if (st->first_error.ok() || (absl::IsCancelled(st->first_error) && !absl::IsCancelled(e))) {
        st->first_error = e;
      }
      if (MarkAbortedLocked(*st)) {
        abort = true;
        why = e;
      }
    }
    ++st->returned;
    if (!c->only_sends && !st->answered) --st->remaining;
    last = TakeAnswerLocked(*st);
  }
  if (late) LOG(WARNING) << "Step " << st->step_id << ": " << c->task << " failed after the step ended: " << result;
  if (abort) st->pool->Schedule([this, st, why] { AbortStep(st, why); });
  if (last) FinishStep(st);
  Reported(st);
}

bool MasterSessionImpl::MarkAbortedLocked(StepState& st) {
  if (st.aborted || st.answered) return false;
  st.aborted = true;
  ++st.unreported;  // until AbortDone
  return true;
}

bool MasterSessionImpl::TakeAnswerLocked(StepState& st) {
  if (st.answered) return false;
  // A failed step's consumers may have ended before receiving what the
  // partitions that only send produce: those may still run (and hold the
  // root cause), so the answer waits for them and for the abort.
  st.answered = st.aborted ? st.told && st.returned == static_cast<int>(st.calls.size()) : st.remaining == 0;
  return st.answered;
}

void MasterSessionImpl::Reported(const std::shared_ptr<StepState>& st) {
  bool all_reported = false;
  {
    absl::MutexLock lock(&st->mu);
    all_reported = --st->unreported == 0;
  }
  if (all_reported) {
    absl::MutexLock lock(&active_mu_);
    active_.erase(st.get());
  }
}

void MasterSessionImpl::AbortStep(const std::shared_ptr<StepState>& st, const absl::Status& why,
                                  const std::string& skip, bool counted) {
  std::set<std::string> tasks;
  for (auto& [device, pp] : st->plan->parts) tasks.insert(pp.task);
  tasks.erase(skip);
  // A task is told first, then its calls are cancelled: a RunGraph that
  // answered first would say the partition ended, which it may not have.
  // (Cancelling a call ends the master's wait, not the partition.)
  auto cancel_calls_on = [st](const std::string& task) {
    for (auto& c : st->calls)
      if (c->task == task) c->opts.StartCancel();
  };
  cancel_calls_on(skip);
  auto req = std::make_shared<proto::CleanupGraphRequest>();
  req->set_step_id(st->step_id);
  req->set_abort_message(std::string(why.message()));
  req->set_abort_code(static_cast<int>(why.code()));
  // One for each task, and one for this loop.
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(tasks.size()) + 1);
  auto one_done = [this, st, left, counted] {
    if (left->fetch_sub(1) == 1 && counted) AbortDone(st);
  };
  for (const std::string& task : tasks) {
    absl::StatusOr<std::shared_ptr<WorkerInterface>> worker = workers_->GetWorker(task);
    if (!worker.ok()) {
      cancel_calls_on(task);
      one_done();
      continue;
    }
    (*worker)->CleanupGraphAsync(req.get(), [req, worker = *worker, task, cancel_calls_on, one_done](absl::Status) {
      cancel_calls_on(task);  // told, or not reachable within the cleanup's deadline
      one_done();
    });
  }
  one_done();
}

void MasterSessionImpl::AbortDone(const std::shared_ptr<StepState>& st) {
  bool last = false;
  {
    absl::MutexLock lock(&st->mu);
    st->told = true;
    last = TakeAnswerLocked(*st);
  }
  if (last) FinishStep(st);
  Reported(st);
}

void MasterSessionImpl::SetFetch(const std::shared_ptr<StepState>& st, const std::string& name, const Tensor& t,
                                 proto::NamedTensor* out) {
  EncodeFetch(bulk_, st->req->accept_bulk(), name, t, out);
}

void MasterSessionImpl::FinishStep(const std::shared_ptr<StepState>& st) {
  absl::Status error;
  {
    absl::MutexLock lock(&st->mu);
    error = st->first_error;
  }
  if (!error.ok()) return st->done(error);
  AnswerStep(st);
}

void MasterSessionImpl::AnswerStep(const std::shared_ptr<StepState>& st) {
  std::map<std::string, const Tensor*> fetched;
  for (auto& c : st->calls) {
    if (c->only_sends) continue;  // no fetches; may still be running
    const RunGraphCall& rc = c->run;
    for (size_t i = 0; i < rc.recv.size() && i < rc.recv_keys.size(); ++i) fetched[rc.recv_keys[i]] = &rc.recv[i];
  }
  if (st->req->trace()) {
    for (auto& c : st->calls) AppendStepStatsProto(c->run.stats, st->resp->mutable_step_stats());
  }
  for (const std::string& f : st->fetch_keys) {
    proto::NamedTensor* nt = st->resp->add_tensor();
    nt->set_name(f);
    if (auto l = fetched.find(f); l != fetched.end()) {
      SetFetch(st, f, *l->second, nt);
    } else if (auto b = st->bulk_feeds.find(f); b != st->bulk_feeds.end()) {
      SetFetch(st, f, b->second, nt);
    } else if (auto fv = st->feed_values.find(f); fv != st->feed_values.end()) {
      *nt->mutable_tensor() = *fv->second;
    } else {
      return st->done(absl::InternalError(absl::StrCat("Fetch '", f, "' was not produced by any partition")));
    }
  }
  st->done(absl::OkStatus());
}

void MasterSessionImpl::AbortStepsOnTask(const std::string& task, const absl::Status& why) {
  std::vector<std::shared_ptr<StepState>> steps;
  std::vector<std::shared_ptr<Registration>> registrations;
  {
    absl::MutexLock lock(&active_mu_);
    for (auto& [raw, weak] : active_)
      if (std::shared_ptr<StepState> st = weak.lock()) steps.push_back(std::move(st));
    for (auto& [raw, reg] : registering_)
      if (reg->task == task) registrations.push_back(reg);
  }
  // A step still registering its plan on the dead task fails now, not when
  // the RegisterGraph call's deadline passes.
  // (The heartbeat repeats this while the task stays dead: said once.)
  for (const std::shared_ptr<Registration>& reg : registrations) {
    if (reg->Abort(why)) {
      LOG(WARNING) << "Registering a partition of session " << handle_ << " on " << task << " fails: " << why.message();
    }
  }
  for (const std::shared_ptr<StepState>& st : steps) {
    bool involved = false;
    for (auto& c : st->calls) involved |= c->task == task;
    if (!involved) continue;
    bool abort = false;
    {
      absl::MutexLock lock(&st->mu);
      if (st->answered) continue;
      // The root cause, which the cancelled partitions' errors do not replace.
      if (st->first_error.ok() || absl::IsCancelled(st->first_error)) st->first_error = why;
      abort = MarkAbortedLocked(*st);
    }
    if (abort) {
      LOG(WARNING) << "Step " << st->step_id << " fails: " << why.message();
      st->pool->Schedule([this, st, why, task] { AbortStep(st, why, task); });
    }
  }
}

int MasterSessionImpl::LogStalledSteps(absl::Duration every) {
  std::vector<std::shared_ptr<StepState>> steps;
  std::vector<std::shared_ptr<Registration>> registrations;
  {
    absl::MutexLock lock(&active_mu_);
    for (auto& [raw, weak] : active_)
      if (std::shared_ptr<StepState> st = weak.lock()) steps.push_back(std::move(st));
    for (auto& [raw, reg] : registering_) registrations.push_back(reg);
  }
  const absl::Time now = Now();
  int reports = 0;
  for (const std::shared_ptr<Registration>& reg : registrations) {
    {
      absl::MutexLock lock(&reg->mu);
      if (now - reg->started < every || now - reg->logged < every) continue;
      reg->logged = now;
    }
    LOG(WARNING) << "A step of session " << handle_ << " has waited "
                 << absl::FormatDuration(absl::Trunc(now - reg->started, absl::Milliseconds(100))) << " for "
                 << reg->task << " to register its partition (RegisterGraph)";
    ++reports;
  }
  for (const std::shared_ptr<StepState>& st : steps) {
    std::vector<std::string> waiting;
    {
      absl::MutexLock lock(&st->mu);
      if (now - st->started < every || now - st->logged < every || st->answered) continue;
      st->logged = now;
      for (auto& c : st->calls)
        if (!c->returned) waiting.push_back(c->task);
    }
    LOG(WARNING) << "Step " << st->step_id << " of session " << handle_ << " has been running for "
                 << absl::FormatDuration(absl::Trunc(now - st->started, absl::Milliseconds(100)))
                 << "; waiting for the partitions on " << absl::StrJoin(waiting, ", ");
    ++reports;
  }
  return reports;
}

void MasterSessionImpl::CancelActiveSteps() {
  std::vector<std::shared_ptr<StepState>> steps;
  std::vector<std::shared_ptr<Registration>> registrations;
  {
    absl::MutexLock lock(&active_mu_);
    refuse_steps_ = true;
    for (auto& [raw, weak] : active_)
      if (std::shared_ptr<StepState> st = weak.lock()) steps.push_back(std::move(st));
    // Registrations in flight get a moment to end by themselves: one that
    // answers is deregistered by its step (which then finds the session
    // closed), while cancelling it could leave its partition on the task.
    auto registered = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return registering_.empty(); };
    (void)active_mu_.AwaitWithTimeout(absl::Condition(&registered), kRegistrationGraceOnClose);
    for (auto& [raw, reg] : registering_) registrations.push_back(reg);
  }
  // Those still waiting (a task that does not answer) end now.
  for (const std::shared_ptr<Registration>& reg : registrations) {
    reg->Abort(absl::CancelledError(absl::StrCat("Session '", handle_, "' is closing")));
  }
  // Not under active_mu_: cancelling can finish a step on this thread.
  // Every task's partition is told, not only this task's: cancelling the
  // RunGraph call ends the master's wait, not the partition it started (a
  // partition held at a barrier would run on there until its own deadline).
  for (const std::shared_ptr<StepState>& st : steps) {
    bool counted = false;
    {
      // An answered step is over for its client: what is left of it (a
      // completion's bookkeeping, partitions that only send, updates a ps
      // deferred) ends by itself, and deregistering waits for the updates.
      // One aborted already is told again here, not counted (its own abort
      // may still wait for a thread of the pool). The cancelled partitions'
      // errors say why the step failed.
      absl::MutexLock lock(&st->mu);
      if (st->answered) continue;
      counted = MarkAbortedLocked(*st);
    }
    AbortStep(st, absl::CancelledError("the session is closing"), /*skip=*/"", counted);
  }
  steps.clear();
  absl::MutexLock lock(&active_mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return active_.empty(); };
  if (!active_mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30))) {
    LOG(ERROR) << "Session " << handle_ << ": " << active_.size() << " step(s) did not end within 30 s of closing";
  }
}

}  // namespace distflow
