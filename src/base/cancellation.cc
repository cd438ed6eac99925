#include "base/cancellation.h"

#include <utility>

namespace distflow {

void CancellationManager::StartCancel(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  reason_ = std::move(reason);
  running_thread_ = std::this_thread::get_id();
  // One at a time, so that Deregister knows which one runs: it waits for
  // that one only, and removes one that has not started.
  while (!callbacks_.empty()) {
    auto it = callbacks_.begin();
    std::function<void()> fn = std::move(it->second);
    running_ = it->first;
    callbacks_.erase(it);
    mu_.Unlock();
    fn();
    fn = nullptr;  // what it holds goes before a waiting Deregister returns
    mu_.Lock();
    running_ = kInvalidToken;
  }
}

bool CancellationManager::IsCancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

absl::Status CancellationManager::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

CancellationManager::Token CancellationManager::Register(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return kInvalidToken;
  Token t = next_++;
  callbacks_[t] = std::move(fn);
  return t;
}

bool CancellationManager::Deregister(Token token) {
  absl::MutexLock lock(&mu_);
  if (callbacks_.erase(token) > 0) return true;
  if (token != kInvalidToken && running_ == token && running_thread_ != std::this_thread::get_id()) {
    auto done = [this, token]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return running_ != token; };
    mu_.Await(absl::Condition(&done));
  }
  return false;
}

}  // namespace distflow
