// Variables and the per-device resource manager that owns them.
//
// A Var holds one mutable tensor. Readers take a snapshot that shares the
// buffer; writers update in place when no snapshot is alive and copy first
// otherwise (copy-on-write), so a value a step has read never changes under it.
//
// ResourceMgr maps (container, shared_name) to a Var, and to other stateful
// resources that ops share across steps (the gradient accumulators and step
// barrier of synchronous training). Both outlive runs and sessions;
// Cleanup(container) drops a container (Session Reset).
// The classes here are thread-safe; a Resource subclass must be too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"

namespace distflow {

class Var {
 public:
  Var(std::string name, DataType dtype, PartialShape shape)
      : name_(std::move(name)), dtype_(dtype), declared_shape_(std::move(shape)) {}

  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const PartialShape& declared_shape() const { return declared_shape_; }

  absl::Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }
  bool is_initialized() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return value_.IsInitialized(); }

  // A snapshot of the value, or FailedPrecondition naming the variable if it
  // was never assigned.
  absl::StatusOr<Tensor> Read() const ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the value (Assign). Shares the buffer, except memory the caller
  // only lent (a numpy feed), which the variable must not alias.
  void Set(Tensor value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool lent = value.buffer() != nullptr && value.buffer()->borrowed();
    value_ = lent ? value.DeepCopy() : std::move(value);
  }
  // The value to update in place, copied first if a snapshot shares it.
  // FailedPrecondition if uninitialised.
  absl::StatusOr<Tensor*> MutableValue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Tensor& value() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return value_; }

  absl::Status UninitializedError() const;

 private:
  const std::string name_;
  const DataType dtype_;
  const PartialShape declared_shape_;
  mutable absl::Mutex mu_;
  Tensor value_ ABSL_GUARDED_BY(mu_);
};

// A stateful object other than a variable, shared by the ops that name it.
// Subclasses declare `static constexpr char kTypeName[]`.
class Resource {
 public:
  virtual ~Resource() = default;
  virtual const char* type_name() const = 0;
};

class ResourceMgr {
 public:
  // The resource of type T at (container, name), made by `create` if absent.
  // InvalidArgument if a resource of another type holds the name.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(const std::string& container, const std::string& name,
                                                    const std::function<std::shared_ptr<T>()>& create) {
    ASSIGN_OR_RETURN(std::shared_ptr<Resource> r, LookupOrCreateResource(container, name, T::kTypeName, [&create] {
                       return std::shared_ptr<Resource>(create());
                     }));
    return std::static_pointer_cast<T>(r);
  }

  // The resource of type T at (container, name): NotFound if absent,
  // InvalidArgument if it is of another type.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(const std::string& container, const std::string& name) const {
    ASSIGN_OR_RETURN(std::shared_ptr<Resource> r, LookupResource(container, name, T::kTypeName));
    return std::static_pointer_cast<T>(r);
  }

  // The Var at (container, name), created if absent. If it exists with another
  // dtype or an incompatible shape, InvalidArgument naming both.
  absl::StatusOr<std::shared_ptr<Var>> LookupOrCreateVar(const std::string& container, const std::string& name,
                                                         DataType dtype, const PartialShape& shape);
  // NotFound if absent.
  absl::StatusOr<std::shared_ptr<Var>> LookupVar(const std::string& container, const std::string& name) const;

  // Drops every resource of `container`; OK if it does not exist.
  void Cleanup(const std::string& container);
  std::vector<std::string> Containers() const;
  // Number of resources other than variables across containers.
  size_t NumResources() const;
  // Number of variables across containers.
  size_t NumVars() const;
  // Every (container, name, var), for checkpointing and debugging.
  std::vector<std::tuple<std::string, std::string, std::shared_ptr<Var>>> AllVars() const;

 private:
  mutable absl::Mutex mu_;
  absl::StatusOr<std::shared_ptr<Resource>> LookupOrCreateResource(
      const std::string& container, const std::string& name, const char* type_name,
      const std::function<std::shared_ptr<Resource>()>& create);
  absl::StatusOr<std::shared_ptr<Resource>> LookupResource(const std::string& container, const std::string& name,
                                                           const char* type_name) const;

  std::map<std::string, std::map<std::string, std::shared_ptr<Var>>> containers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, std::shared_ptr<Resource>>> resources_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
