#include "kernels/resource_mgr.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/bytes_copied.h"

namespace distflow {

absl::Status Var::UninitializedError() const {
  return absl::FailedPreconditionError(absl::StrCat(
      "Attempting to use uninitialized variable '", name_,
      "'. Run its initializer (or the init op from InitializeAllVariables) first, or restore a checkpoint."));
}

absl::StatusOr<Tensor> Var::Read() const {
  absl::ReaderMutexLock lock(&mu_);
  if (!value_.IsInitialized()) return UninitializedError();
  return value_;
}

absl::StatusOr<Tensor*> Var::MutableValue() {
  if (!value_.IsInitialized()) return UninitializedError();
  // use_count() == 1: nobody else holds the buffer; snapshots only appear under mu_.
  // Set() never keeps borrowed memory; the check keeps it that way.
  if (value_.buffer().use_count() > 1 || (value_.buffer() && value_.buffer()->borrowed())) {
    static Counter* copied = BytesCopiedCounter("variable_copy_on_write");
    copied->Increment(static_cast<double>(value_.TotalBytes()));
    value_ = value_.DeepCopy();
  }
  return &value_;
}

absl::StatusOr<std::shared_ptr<Var>> ResourceMgr::LookupOrCreateVar(const std::string& container,
                                                                    const std::string& name, DataType dtype,
                                                                    const PartialShape& shape) {
  absl::MutexLock lock(&mu_);
  auto& vars = containers_[container];
  auto it = vars.find(name);
  if (it != vars.end()) {
    const Var& v = *it->second;
    if (v.dtype() != dtype || !v.declared_shape().IsCompatibleWith(shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Variable '", name, "' in container '", container, "' already exists as ",
                       DataTypeName(v.dtype()), " ", v.declared_shape().DebugString(), "; it cannot be used as ",
                       DataTypeName(dtype), " ", shape.DebugString(), ". Use another name, or Reset the container."));
    }
    return it->second;
  }
  auto var = std::make_shared<Var>(name, dtype, shape);
  vars[name] = var;
  return var;
}

absl::StatusOr<std::shared_ptr<Var>> ResourceMgr::LookupVar(const std::string& container,
                                                            const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto c = containers_.find(container);
  if (c != containers_.end()) {
    auto it = c->second.find(name);
    if (it != c->second.end()) return it->second;
  }
  return absl::NotFoundError(absl::StrCat("No variable '", name, "' in container '", container, "'"));
}

absl::StatusOr<std::shared_ptr<Resource>> ResourceMgr::LookupOrCreateResource(
    const std::string& container, const std::string& name, const char* type_name,
    const std::function<std::shared_ptr<Resource>()>& create) {
  absl::MutexLock lock(&mu_);
  auto& resources = resources_[container];
  auto it = resources.find(name);
  if (it != resources.end()) {
    if (std::string(it->second->type_name()) != type_name) {
      return absl::InvalidArgumentError(absl::StrCat("Resource '", name, "' in container '", container, "' is a ",
                                                     it->second->type_name(), ", not a ", type_name,
                                                     ". Use another name, or Reset the container."));
    }
    return it->second;
  }
  std::shared_ptr<Resource> r = create();
  resources[name] = r;
  return r;
}

absl::StatusOr<std::shared_ptr<Resource>> ResourceMgr::LookupResource(const std::string& container,
                                                                      const std::string& name,
                                                                      const char* type_name) const {
  absl::MutexLock lock(&mu_);
  auto c = resources_.find(container);
  if (c == resources_.end() || c->second.find(name) == c->second.end()) {
    return absl::NotFoundError(absl::StrCat("No ", type_name, " '", name, "' in container '", container,
                                            "' (it was never created, or its container was reset)"));
  }
  const std::shared_ptr<Resource>& r = c->second.find(name)->second;
  if (std::string(r->type_name()) != type_name) {
    return absl::InvalidArgumentError(absl::StrCat("Resource '", name, "' in container '", container, "' is a ",
                                                   r->type_name(), ", not a ", type_name));
  }
  return r;
}

void ResourceMgr::Cleanup(const std::string& container) {
  std::map<std::string, std::shared_ptr<Resource>> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  containers_.erase(container);
  auto it = resources_.find(container);
  if (it != resources_.end()) {
    dropped.swap(it->second);
    resources_.erase(it);
  }
}

std::vector<std::string> ResourceMgr::Containers() const {
  absl::MutexLock lock(&mu_);
  std::set<std::string> names;
  for (const auto& [name, vars] : containers_) names.insert(name);
  for (const auto& [name, rs] : resources_) names.insert(name);
  return {names.begin(), names.end()};
}

size_t ResourceMgr::NumResources() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [name, rs] : resources_) n += rs.size();
  return n;
}

size_t ResourceMgr::NumVars() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [name, vars] : containers_) n += vars.size();
  return n;
}

std::vector<std::tuple<std::string, std::string, std::shared_ptr<Var>>> ResourceMgr::AllVars() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::tuple<std::string, std::string, std::shared_ptr<Var>>> out;
  for (const auto& [c, vars] : containers_)
    for (const auto& [n, v] : vars) out.emplace_back(c, n, v);
  return out;
}

}  // namespace distflow
