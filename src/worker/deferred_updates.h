// DeferredUpdates: the partition runs of one task that answer their step
// before their variable updates have run (docs/PERFORMANCE.md, "Deferred
// variable updates"; the master marks such partitions,
// placement/deferred_updates.h).
//
// A run is answered (OK, with its fetches) once its outputs are out, if no
// earlier run of the same session still has updates in flight; otherwise
// its answer waits until they end. So a session (one worker's client) has
// at most one step's updates in flight on a task: its next step may read
// variables without them (staleness of one step) but never without older
// ones. A run that ends before it was answered is answered with its result,
// as if nothing was deferred.
//
// A failed deferred update is logged, counted
// (distflow_deferred_update_failures_total) and kept for the session: its
// next run on this task fails with it (TakeError). Work that must see every
// update waits for those in flight: runs of the session that do not defer
// (AfterUpdates with the session), checkpoints (every session: ""),
// deregistration and shutdown (WaitForUpdates). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace distflow {

class DeferredUpdates {
 public:
  // One partition run that may answer early.
  struct Run {
    std::string session;
    int64_t step_id = 0;
    // Under DeferredUpdates::mu_:
    bool answered = false;       // its answer has been given (or claimed)
    uint64_t tail = 0;           // non-zero: its updates are in flight under this number
    std::function<void()> held;  // its early answer, waiting for the session's updates in flight
    bool aborted = false;        // its step was aborted from outside (Aborted)
  };

  explicit DeferredUpdates(std::string task) : task_(std::move(task)) {}

  std::shared_ptr<Run> Begin(std::string session, int64_t step_id);
  // The run's outputs are out: `answer` (which answers it OK) runs now, on
  // this thread, unless the session has updates in flight; then it runs when
  // they end, unless the run has ended first (End claims it).
  void OutputsDone(const std::shared_ptr<Run>& run, std::function<void()> answer);
  // The run has ended with `status`. True: it was not answered yet, and the
  // caller answers it with its result. False: it was, and this was the end
  // of its deferred updates (a failure is logged, counted and kept for the
  // session's next run).
  bool End(const std::shared_ptr<Run>& run, const absl::Status& status);

  // The run's step was aborted by its master (a failure elsewhere in the
  // step, which the client has), the master's death or the task's
  // shutdown: a failure of its updates is logged and counted but not kept
  // for the session's next run.
  void Aborted(const std::shared_ptr<Run>& run);

  // The session's deferred failure not reported yet (OK if none); cleared.
  absl::Status TakeError(const std::string& session);
  // Runs `fn` once the updates in flight now of `session` ("": of every
  // session) have ended: at once, on this thread, if there are none.
  void AfterUpdates(const std::string& session, std::function<void()> fn);
  // Blocks until the updates in flight now of `session` ("": every
  // session's) have ended, or `timeout` passes (false, logged).
  bool WaitForUpdates(const std::string& session, absl::Duration timeout);
  // Drops what is kept for a session that has no partitions left here.
  void Forget(const std::string& session);

  // Deferred updates in flight on this task.
  int in_flight() const;
  // Threads blocked in WaitForUpdates now, and runs queued by
  // AfterUpdates (tests wait for one).
  int blocked_waiters() const;
  int queued_runs() const;
  // Over the process: runs answered before their updates ended, and
  // deferred updates that failed.
  static double DeferredTotal();
  static double FailedTotal();

 private:
  struct Session {
    std::set<uint64_t> tails;                // numbers of the updates in flight
    std::vector<std::shared_ptr<Run>> held;  // answers waiting for them, oldest first
    absl::Status error;                      // a failure not reported yet
    int64_t error_step = 0;
  };
  struct Waiter {
    std::string session;  // "": every session
    uint64_t upto = 0;    // waits for the updates numbered up to this
    std::function<void()> fn;
  };
  // True if an update of `session` ("": any) numbered <= upto is in flight.
  bool PendingLocked(const std::string& session, uint64_t upto) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `run`'s updates in flight (it is answered now).
  void StartTailLocked(Session& s, const std::shared_ptr<Run>& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string task_;
  mutable absl::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> all_tails_ ABSL_GUARDED_BY(mu_);
  uint64_t next_tail_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace distflow
