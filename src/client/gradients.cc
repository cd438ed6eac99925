#include "client/gradients.h"

namespace distflow {

GradientRegistry* GradientRegistry::Global() {
  static GradientRegistry* r = [] {
    auto* reg = new GradientRegistry;
    RegisterStandardGradients(reg);
    return reg;
  }();
  return r;
}

void GradientRegistry::Register(const std::string& op, GradFunc fn) {
  absl::MutexLock lock(&mu_);
  funcs_[op] = std::move(fn);
}

void GradientRegistry::RegisterNoGradient(const std::string& op) {
  absl::MutexLock lock(&mu_);
  no_grad_[op] = true;
}

const GradFunc* GradientRegistry::Find(const std::string& op, bool* no_gradient) const {
  absl::MutexLock lock(&mu_);
  *no_gradient = no_grad_.count(op) > 0;
  auto it = funcs_.find(op);
  return it == funcs_.end() ? nullptr : &it->second;
}

void RegisterStandardGradients(GradientRegistry* r) {}

absl::StatusOr<std::vector<Output>> Gradients(const Scope& scope, const std::vector<Output>& ys,
                                              const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                              const GradientOptions& options) {
  return absl::UnimplementedError("Gradients is not implemented yet");
}

}  // namespace distflow
