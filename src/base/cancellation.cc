#include "base/cancellation.h"

#include <vector>

namespace distflow {

void CancellationManager::StartCancel(absl::Status reason) {
  std::vector<std::function<void()>> run;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    reason_ = std::move(reason);
    for (auto& [token, fn] : callbacks_) run.push_back(std::move(fn));
    callbacks_.clear();
  }
  for (auto& fn : run) fn();
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
  return callbacks_.erase(token) > 0;
}

}  // namespace distflow
