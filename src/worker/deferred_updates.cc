#include "worker/deferred_updates.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/metrics.h"

namespace distflow {
namespace {

Counter* DeferredCounter() {
  static Counter* c = Metrics::Global()->GetCounter(
      "distflow_deferred_updates_total",
      "Partition runs answered before their variable updates had run (deferred updates, one step stale)");
  return c;
}

Counter* FailedCounter() {
  static Counter* c = Metrics::Global()->GetCounter(
      "distflow_deferred_update_failures_total",
      "Deferred variable updates that failed after their step had been answered (reported on the session's next "
      "step)");
  return c;
}

}  // namespace

std::shared_ptr<DeferredUpdates::Run> DeferredUpdates::Begin(std::string session, int64_t step_id) {
  auto run = std::make_shared<Run>();
  run->session = std::move(session);
  run->step_id = step_id;
  return run;
}

void DeferredUpdates::StartTailLocked(Session& s, const std::shared_ptr<Run>& run) {
  run->answered = true;
  run->tail = ++next_tail_;
  s.tails.insert(run->tail);
  all_tails_.insert(run->tail);
  DeferredCounter()->Increment();
}

void DeferredUpdates::OutputsDone(const std::shared_ptr<Run>& run, std::function<void()> answer) {
  {
    absl::MutexLock lock(&mu_);
    if (run->answered) return;
    Session& s = sessions_[run->session];
    if (!s.tails.empty()) {
      // The session's previous step still updates: at most one in flight.
      run->held = std::move(answer);
      s.held.push_back(run);
      return;
    }
    StartTailLocked(s, run);
  }
  answer();
}

bool DeferredUpdates::PendingLocked(const std::string& session, uint64_t upto) const {
  const std::set<uint64_t>* tails = &all_tails_;
  if (!session.empty()) {
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return false;
    tails = &it->second.tails;
  }
  return !tails->empty() && *tails->begin() <= upto;
}

bool DeferredUpdates::End(const std::shared_ptr<Run>& run, const absl::Status& status) {
  std::vector<std::function<void()>> ready;
  bool failed = false;
  {
    absl::MutexLock lock(&mu_);
    Session& s = sessions_[run->session];
    if (!run->answered) {
      run->answered = true;
      s.held.erase(std::remove(s.held.begin(), s.held.end(), run), s.held.end());
      run->held = nullptr;
      return true;
    }
    s.tails.erase(run->tail);
    all_tails_.erase(run->tail);
    if (!status.ok()) {
      failed = true;
      FailedCounter()->Increment();
      if (s.error.ok() && !run->aborted) {
        s.error = status;
        s.error_step = run->step_id;
      }
    }
    if (s.tails.empty() && !s.held.empty()) {
      std::shared_ptr<Run> next = s.held.front();
      s.held.erase(s.held.begin());
      StartTailLocked(s, next);
      ready.push_back(std::move(next->held));
      next->held = nullptr;
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (PendingLocked(it->session, it->upto)) {
        ++it;
        continue;
      }
      ready.push_back(std::move(it->fn));
      it = waiters_.erase(it);
    }
  }
  if (failed) {
    LOG(ERROR) << task_ << ": the deferred variable updates of step " << run->step_id << " (session " << run->session
               << ") failed after the step had been answered: " << status.message()
               << (run->aborted ? ". The step was aborted from outside; its updates are lost."
                                : ". The session's next step here fails with this error.");
  }
  for (auto& fn : ready) fn();
  return false;
}

void DeferredUpdates::Aborted(const std::shared_ptr<Run>& run) {
  absl::MutexLock lock(&mu_);
  run->aborted = true;
}

absl::Status DeferredUpdates::TakeError(const std::string& session) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || it->second.error.ok()) return absl::OkStatus();
  absl::Status e = it->second.error;
  it->second.error = absl::OkStatus();
  return absl::Status(
      e.code(), absl::StrCat("[", task_, "] The deferred variable updates of an earlier step (", it->second.error_step,
                             ") failed after it had been answered: ", e.message(), ". This step was not run."));
}

void DeferredUpdates::AfterUpdates(const std::string& session, std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (PendingLocked(session, next_tail_)) {
      waiters_.push_back(Waiter{session, next_tail_, std::move(fn)});
      return;
    }
  }
  fn();
}

bool DeferredUpdates::WaitForUpdates(const std::string& session, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const uint64_t upto = next_tail_;
  auto ended = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !PendingLocked(session, upto); };
  ++blocked_;
  const bool done = mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  --blocked_;
  if (done) return true;
  LOG(ERROR) << task_ << ": deferred variable updates"
             << (session.empty() ? std::string() : absl::StrCat(" of session ", session)) << " did not end within "
             << absl::FormatDuration(timeout);
  return false;
}

void DeferredUpdates::Forget(const std::string& session) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it != sessions_.end() && it->second.tails.empty() && it->second.held.empty()) sessions_.erase(it);
}

int DeferredUpdates::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(all_tails_.size());
}

int DeferredUpdates::blocked_waiters() const {
  absl::MutexLock lock(&mu_);
  return blocked_;
}

int DeferredUpdates::queued_runs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

double DeferredUpdates::DeferredTotal() { return DeferredCounter()->value(); }
double DeferredUpdates::FailedTotal() { return FailedCounter()->value(); }

}  // namespace distflow
