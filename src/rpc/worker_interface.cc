#include "rpc/worker_interface.h"

#include "absl/synchronization/notification.h"

namespace distflow {
namespace {

// Runs an asynchronous call and waits for its callback.
absl::Status Wait(const std::function<void(WorkerInterface::StatusCallback)>& start) {
  absl::Notification finished;
  absl::Status result;
  start([&](absl::Status s) {
    result = std::move(s);
    finished.Notify();
  });
  finished.WaitForNotification();  // the transport bounds the call
  return result;
}

}  // namespace

void CallOptions::StartCancel() {
  std::function<void()> fn;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    fn = cancel_;
  }
  if (fn) fn();  // outside the lock: cancelling may finish the call here
}

void CallOptions::SetCancelCallback(std::function<void()> fn) {
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    cancel_ = fn;
  }
  if (cancelled) fn();
}

void CallOptions::ClearCancelCallback() {
  std::function<void()> old;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  old.swap(cancel_);
}

absl::Status WorkerInterface::GetStatus(proto::GetStatusResponse* resp) {
  return Wait([&](StatusCallback done) { GetStatusAsync(nullptr, resp, std::move(done)); });
}

absl::Status WorkerInterface::RegisterGraph(const proto::RegisterGraphRequest& req,
                                            proto::RegisterGraphResponse* resp) {
  return Wait([&](StatusCallback done) { RegisterGraphAsync(nullptr, &req, resp, std::move(done)); });
}

absl::Status WorkerInterface::DeregisterGraph(const proto::DeregisterGraphRequest& req) {
  return Wait([&](StatusCallback done) { DeregisterGraphAsync(&req, std::move(done)); });
}

absl::Status WorkerInterface::CleanupGraph(const proto::CleanupGraphRequest& req) {
  return Wait([&](StatusCallback done) { CleanupGraphAsync(&req, std::move(done)); });
}

}  // namespace distflow
