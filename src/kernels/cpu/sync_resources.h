// The resources of the synchronous-training ops (sync_kernels.cc), kept in
// the task's ResourceMgr: WaitableResource, on which an op parks a callback
// until the resource's state satisfies it, its deadline passes or its step
// is cancelled; the Accumulator of one variable's gradients for the current
// global step; and the StepBarrier where workers wait for the chief to
// apply a step. Internal to the kernels. Thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/metrics.h"
#include "base/status_macros.h"
#include "base/timer.h"
#include "kernels/cpu/sparse_row_sum.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace sync_training {

// A resource whose ops may wait for its state to change.
class WaitableResource : public Resource {
 public:
  // Decides under the resource's lock whether the waiter may go on (and
  // records what it found); called at parking and after every change.
  using Check = std::function<bool()>;
  // Under the lock when the deadline passes: the status to finish with.
  using OnTimeout = std::function<absl::Status()>;
  // Outside the lock, exactly once: OK with satisfied = true, the status of
  // OnTimeout with satisfied = false, or Cancelled.
  using Finish = std::function<void(absl::Status, bool satisfied)>;

  // Parks a waiter unless `check` already holds. The caller must hold a
  // shared_ptr to this resource (`self`) for the callbacks to keep it alive.
  //
  // Until its timer and cancellation callback are registered the waiter is
  // pending: nobody else finishes it (a deadline or cancellation that comes
  // meanwhile is only recorded), since finishing ends the step and frees
  // the cancellation manager this function is still registering with.
  void Park(const std::shared_ptr<WaitableResource>& self, Check check, OnTimeout on_timeout, Finish finish,
            absl::Duration timeout, CancellationManager* cm) {
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!check()) {
        id = next_id_++;
        Waiter& w = parked_[id];
        w.check = std::move(check);
        w.on_timeout = std::move(on_timeout);
        w.finish = std::move(finish);
        w.pending = true;
      }
    }
    if (id == 0) {
      finish(absl::OkStatus(), true);
      return;
    }
    const Timer::Id timer = Timer::Global()->After(timeout, [self, id] { self->Expire(id, Source::kTimer); });
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    if (cm != nullptr) token = cm->Register([self, id, cm] { self->Expire(id, Source::kCancel, CancelStatus(cm)); });
    const bool cancelled_already = cm != nullptr && token == CancellationManager::kInvalidToken;
    Waiter w;
    absl::Status status;
    bool satisfied = false;
    Source source = Source::kWake;
    {
      absl::MutexLock lock(&mu_);
      auto it = parked_.find(id);  // still here: a pending waiter is only removed below
      it->second.timer = timer;
      it->second.cm = cm;
      it->second.token = token;
      it->second.pending = false;
      if (it->second.expired) {
        status = it->second.expired_status;
        source = it->second.expired_source;
      } else if (cancelled_already) {
        status = CancelStatus(cm);
        source = Source::kCancel;
      } else if (it->second.check()) {  // the state changed while it was pending
        satisfied = true;
      } else {
        return;  // parked: a wake, the deadline or a cancellation finishes it
      }
      w = std::move(it->second);
      parked_.erase(it);
    }
    Release(w, source);
    w.finish(status, satisfied);
  }

  size_t NumParkedForTest() {
    absl::MutexLock lock(&mu_);
    return parked_.size();
  }

 protected:
  // Finishes every waiter whose check now holds. Call after a change, without the lock.
  void WakeSatisfied() {
    std::vector<Waiter> ready;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (!it->second.pending && it->second.check()) {
          ready.push_back(std::move(it->second));
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Waiter& w : ready) {
      Release(w, Source::kWake);
      w.finish(absl::OkStatus(), true);
    }
  }

  absl::Mutex mu_;

 private:
  enum class Source { kWake, kTimer, kCancel };
  struct Waiter {
    Check check;
    OnTimeout on_timeout;
    Finish finish;
    Timer::Id timer = 0;
    CancellationManager* cm = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    bool pending = false;  // Park is still registering its timer and cancellation
    // A deadline or cancellation that came while pending.
    bool expired = false;
    absl::Status expired_status;
    Source expired_source = Source::kWake;
  };

  // Why the step was cancelled (e.g. a task it waits on died), as the
  // waiter's error.
  static absl::Status CancelStatus(CancellationManager* cm) {
    absl::Status reason = cm->reason();
    return reason.ok() ? absl::CancelledError("The step was cancelled") : reason;
  }

  void Expire(uint64_t id, Source source, absl::Status cancelled = absl::CancelledError("The step was cancelled")) {
    Waiter w;
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      auto it = parked_.find(id);
      if (it == parked_.end()) return;
      if (it->second.pending) {  // Park finishes it once registered
        if (!it->second.expired) {
          it->second.expired = true;
          it->second.expired_status = source == Source::kTimer ? it->second.on_timeout() : cancelled;
          it->second.expired_source = source;
        }
        return;
      }
      w = std::move(it->second);
      parked_.erase(it);
      status = source == Source::kTimer ? w.on_timeout() : cancelled;
    }
    Release(w, source);
    w.finish(status, false);
  }

  // Drops the waiter's timer and cancellation callback, except the one running.
  static void Release(const Waiter& w, Source source) {
    if (source != Source::kTimer && w.timer != 0) Timer::Global()->Cancel(w.timer);
    if (source != Source::kCancel && w.cm != nullptr && w.token != CancellationManager::kInvalidToken) {
      w.cm->Deregister(w.token);
    }
  }

  std::map<uint64_t, Waiter> parked_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// Gradients of one variable for the current global step: dense tensors
// (ConditionalAccumulator) or, for a variable whose gradient is an
// IndexedSlices, rows (SparseConditionalAccumulator, sparse_row_sum.h); the
// first gradient decides which, and the other kind is then an error.
class Accumulator : public WaitableResource {
 public:
  static constexpr char kTypeName[] = "ConditionalAccumulator";
  Accumulator(std::string name, DataType dtype) : name_(std::move(name)), dtype_(dtype) {}
  const char* type_name() const override { return kTypeName; }
  const std::string& name() const { return name_; }

  absl::Status Apply(int64_t local_step, int64_t replica, const Tensor& grad) {
    if (grad.dtype() != dtype_) {
      return absl::InvalidArgumentError(absl::StrCat("Gradient accumulator '", name_, "' holds ", DataTypeName(dtype_),
                                                     ", got a ", DataTypeName(grad.dtype()), " gradient"));
    }
    {
      absl::MutexLock lock(&mu_);
      if (Drops(local_step, replica)) return absl::OkStatus();
      if (sparse_) return KindError("a dense", "sparse (IndexedSlices)");
      if (count_ == 0) {
        ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(dtype_, grad.shape()));
        sum_ = std::move(copy);
        if (dtype_ == DT_FLOAT) {
          std::copy_n(grad.flat<float>().data(), grad.NumElements(), sum_.flat<float>().data());
        } else {
          std::copy_n(grad.flat<double>().data(), grad.NumElements(), sum_.flat<double>().data());
        }
      } else {
        if (grad.shape() != sum_.shape()) {
          return absl::InvalidArgumentError(absl::StrCat("Gradient accumulator '", name_, "' holds shape ",
                                                         sum_.shape().DebugString(), ", got a gradient of shape ",
                                                         grad.shape().DebugString()));
        }
        if (dtype_ == DT_FLOAT) {
          Add<float>(grad);
        } else {
          Add<double>(grad);
        }
      }
      ++count_;
      contributed_.insert(replica);
    }
    WakeSatisfied();
    return absl::OkStatus();
  }

  // A sparse gradient: values[i] is row indices[i] (int64) of a num_rows-row
  // tensor; rows of one index add up.
  absl::Status ApplySparse(int64_t local_step, int64_t replica, const Tensor& indices, const Tensor& values,
                           int64_t num_rows) {
    if (values.dtype() != dtype_) {
      return absl::InvalidArgumentError(absl::StrCat("Gradient accumulator '", name_, "' holds ", DataTypeName(dtype_),
                                                     ", got a ", DataTypeName(values.dtype()), " gradient"));
    }
    {
      absl::MutexLock lock(&mu_);
      if (Drops(local_step, replica)) return absl::OkStatus();
      if (!sparse_ && count_ > 0) return KindError("a sparse (IndexedSlices)", "dense");
      sparse_ = true;
      if (absl::Status s = rows_.Add(name_, indices, values, num_rows); !s.ok()) return s;
      ++count_;
      contributed_.insert(replica);
    }
    WakeSatisfied();
    return absl::OkStatus();
  }

  // Under the lock.
  bool Ready(int64_t required) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return initialized_ && count_ >= required; }

  absl::Status Take(int64_t required, Tensor* average, int64_t* dropped) {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckTake(required); !s.ok()) return s;
    if (sparse_) return KindError("a dense take of", "sparse (IndexedSlices)");
    if (dtype_ == DT_FLOAT) {
      Scale<float>(1.0 / static_cast<double>(count_));
    } else {
      Scale<double>(1.0 / static_cast<double>(count_));
    }
    *average = std::move(sum_);
    sum_ = Tensor();
    NextStep(dropped);
    return absl::OkStatus();
  }

  // The average of the accumulated sparse gradients: the distinct indices
  // (increasing), their rows' sums divided by the number of gradients (the
  // dense average's rows; the rows no gradient touched are zero there), and
  // the tensor's row count. Resets and advances as Take does.
  absl::Status TakeSparse(int64_t required, Tensor* indices, Tensor* values, int64_t* num_rows, int64_t* dropped) {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckTake(required); !s.ok()) return s;
    if (!sparse_) return KindError("a sparse take of", "dense");
    if (absl::Status s = rows_.Take(dtype_, 1.0 / static_cast<double>(count_), indices, values, num_rows); !s.ok()) {
      return s;
    }
    rows_.Clear();
    NextStep(dropped);
    return absl::OkStatus();
  }

  void SetGlobalStep(int64_t step) {
    {
      absl::MutexLock lock(&mu_);
      if (!initialized_ || step != step_) {
        dropped_ += count_;
        if (count_ > 0) {
          Metrics::Global()
              ->GetCounter("distflow_sync_dropped_gradients_total", "", {{"reason", "step_moved"}})
              ->Increment(static_cast<double>(count_));
        }
        count_ = 0;
        sum_ = Tensor();
        rows_.Clear();
        contributed_.clear();
      }
      initialized_ = true;
      step_ = step;
    }
    WakeSatisfied();
  }

  absl::Mutex* mu() ABSL_LOCK_RETURNED(mu_) { return &mu_; }

 private:
  // True (and counted) if a gradient for `local_step` from `replica` is dropped.
  bool Drops(int64_t local_step, int64_t replica) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (initialized_ && local_step >= step_ && contributed_.count(replica) == 0) return false;
    ++dropped_;
    const char* why = !initialized_ ? "uninitialized" : local_step < step_ ? "stale" : "duplicate";
    Metrics::Global()
        ->GetCounter("distflow_sync_dropped_gradients_total",
                     "Gradients a sync accumulator on this task dropped: computed at an older step "
                     "(stale), a second one from a replica (duplicate), or before initialisation",
                     {{"reason", why}})
        ->Increment();
    return true;
  }

  absl::Status KindError(const char* got, const char* holds) const {
    return absl::InvalidArgumentError(absl::StrCat("Gradient accumulator '", name_, "' got ", got,
                                                   " gradient but holds ", holds,
                                                   " ones: every worker must compute the variable's gradient the "
                                                   "same way"));
  }

  absl::Status CheckTake(int64_t required) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!initialized_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Gradient accumulator '", name_, "' has not been initialised by the chief (was its task restarted?)"));
    }
    if (count_ < required) {
      return absl::FailedPreconditionError(absl::StrCat("Gradient accumulator '", name_, "' holds ", count_,
                                                        " gradients for step ", step_, ", ", required,
                                                        " are required (was its task restarted?)"));
    }
    return absl::OkStatus();
  }

  void NextStep(int64_t* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    *dropped = dropped_;
    dropped_ = 0;
    count_ = 0;
    contributed_.clear();
    ++step_;
  }

  template <typename T>
  void Add(const Tensor& grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Span<T> s = sum_.flat<T>();
    absl::Span<const T> g = grad.flat<T>();
    for (size_t i = 0; i < s.size(); ++i) s[i] += g[i];
  }
  template <typename T>
  void Scale(double f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (T& v : sum_.flat<T>()) v = static_cast<T>(v * f);
  }

  const std::string name_;
  const DataType dtype_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  Tensor sum_ ABSL_GUARDED_BY(mu_);
  bool sparse_ ABSL_GUARDED_BY(mu_) = false;
  SparseRowSum rows_ ABSL_GUARDED_BY(mu_);
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<int64_t> contributed_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Where the workers wait for the chief to apply a step.
class StepBarrier : public WaitableResource {
 public:
  static constexpr char kTypeName[] = "SyncStepBarrier";
  explicit StepBarrier(std::string name) : name_(std::move(name)) {}
  const char* type_name() const override { return kTypeName; }

  int64_t LocalStep(int64_t replica) {
    absl::MutexLock lock(&mu_);
    if (!initialized_) return -1;
    auto it = local_.find(replica);
    // A replica the barrier has not released yet, or one left ahead by a
    // restore of an older step, works at the current step.
    if (it == local_.end() || it->second > step_) return step_;
    return it->second;
  }

  void Release(int64_t step) {
    {
      absl::MutexLock lock(&mu_);
      initialized_ = true;
      step_ = step;
      // Reports for steps long gone are of no use any more.
      reported_.erase(reported_.begin(), reported_.lower_bound(step - 1));
    }
    WakeSatisfied();
  }

  // Records the report and parks `finish` until the step moves on.
  void Wait(const std::shared_ptr<StepBarrier>& self, int64_t local_step, int64_t replica, int64_t to_aggregate,
            int64_t total, absl::Duration timeout, CancellationManager* cm,
            std::function<void(absl::Status, int64_t)> done) {
    {
      absl::MutexLock lock(&mu_);
      reported_[local_step].insert(replica);
    }
    auto result = std::make_shared<int64_t>(-1);
    Park(
        self,
        [this, local_step, replica, result]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          if (!initialized_ || step_ == local_step) return false;
          *result = step_;
          local_[replica] = step_;
          return true;
        },
        [this, local_step, to_aggregate, total, timeout]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          if (!initialized_) {
            return absl::DeadlineExceededError(absl::StrCat(
                "Synchronous training: the chief has not initialised the step barrier '", name_, "' within ",
                absl::FormatDuration(timeout),
                ". The chief (worker replica 0) runs the SyncReplicasOptimizer's hook; check that it is running."));
          }
          std::vector<int64_t> got, missing;
          const std::set<int64_t>& in = reported_[local_step];
          for (int64_t r = 0; r < total; ++r) (in.count(r) ? got : missing).push_back(r);
          return absl::DeadlineExceededError(absl::StrCat(
              "Synchronous training: global step ", local_step, " did not complete within ",
              absl::FormatDuration(timeout), ". Gradients for it were reported by worker replicas [",
              absl::StrJoin(got, ", "), "], not by [", absl::StrJoin(missing, ", "), "]; each step needs ",
              to_aggregate, " of the ", total,
              " replicas, and the chief's SyncReplicasOptimizer hook to apply it. Start the missing workers, "
              "or check the chief's log."));
        },
        [result, done = std::move(done)](absl::Status s, bool satisfied) { done(s, *result); }, timeout, cm);
  }

  void Status(int64_t* step, std::vector<int64_t>* reported) {
    absl::MutexLock lock(&mu_);
    *step = initialized_ ? step_ : -1;
    auto it = reported_.find(step_);
    if (initialized_ && it != reported_.end()) reported->assign(it->second.begin(), it->second.end());
  }

 private:
  const std::string name_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;
  std::map<int64_t, int64_t> local_ ABSL_GUARDED_BY(mu_);               // replica -> step it works at
  std::map<int64_t, std::set<int64_t>> reported_ ABSL_GUARDED_BY(mu_);  // step -> replicas done with it
};

}  // namespace sync_training
}  // namespace distflow
