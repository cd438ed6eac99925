// VarLocks: holds the mutexes of a set of variables (an update's variable
// and its slots) for a scope, taken in address order so two updates over
// overlapping sets never deadlock. The dense and sparse training kernels
// share it.
#pragma once

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/resource_mgr.h"

namespace distflow {

class VarLocks {
 public:
  explicit VarLocks(const std::vector<Var*>& vars) {
    for (Var* v : vars) mus_.push_back(v->mu());
    std::sort(mus_.begin(), mus_.end());
    mus_.erase(std::unique(mus_.begin(), mus_.end()), mus_.end());
    for (absl::Mutex* m : mus_) m->Lock();
  }
  ~VarLocks() {
    for (auto it = mus_.rbegin(); it != mus_.rend(); ++it) (*it)->Unlock();
  }
  VarLocks(const VarLocks&) = delete;
  VarLocks& operator=(const VarLocks&) = delete;

 private:
  std::vector<absl::Mutex*> mus_;
};

}  // namespace distflow
