#include "kernels/function.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"

namespace distflow {
namespace {

struct Registry {
  absl::Mutex mu;
  FunctionInstantiator instantiator ABSL_GUARDED_BY(mu);
  // (serialized def, device, container) -> instance. Instances live as long
  // as the process: a function is small, and its kernels keep their state.
  std::map<std::tuple<std::string, Device*, std::string>, std::shared_ptr<const FunctionInstance>> instances
      ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

void SetFunctionInstantiator(FunctionInstantiator instantiator) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  if (!r.instantiator) r.instantiator = std::move(instantiator);
}

absl::StatusOr<proto::FunctionDef> ParseFunctionDef(const std::string& serialized) {
  proto::FunctionDef def;
  if (serialized.empty() || !def.ParseFromString(serialized)) {
    return absl::InvalidArgumentError("The function attribute does not hold a serialized FunctionDef");
  }
  if (def.arg_size() != def.arg_type_size() || def.ret_size() != def.ret_type_size() ||
      (def.ret_shape_size() != 0 && def.ret_shape_size() != def.ret_size())) {
    return absl::InvalidArgumentError(absl::StrCat("Function '", def.name(), "' is malformed: ", def.arg_size(),
                                                   " args with ", def.arg_type_size(), " types, ", def.ret_size(),
                                                   " results with ", def.ret_type_size(), " types"));
  }
  return def;
}

absl::StatusOr<std::shared_ptr<const FunctionInstance>> InstantiateFunction(const std::string& serialized,
                                                                            Device* device,
                                                                            const std::string& container) {
  Registry& r = GetRegistry();
  const auto key = std::make_tuple(serialized, device, container);
  FunctionInstantiator instantiator;
  {
    absl::MutexLock lock(&r.mu);
    auto it = r.instances.find(key);
    if (it != r.instances.end()) return it->second;
    instantiator = r.instantiator;
  }
  if (!instantiator) {
    return absl::FailedPreconditionError("No function runtime: graph functions run only inside a session");
  }
  ASSIGN_OR_RETURN(proto::FunctionDef def, ParseFunctionDef(serialized));
  ASSIGN_OR_RETURN(std::shared_ptr<const FunctionInstance> made, instantiator(def, device, container));
  absl::MutexLock lock(&r.mu);
  auto [it, inserted] = r.instances.emplace(key, made);  // a racing instantiation may have won
  return it->second;
}

}  // namespace distflow
