// Handles of the resources that TF1's queue and reader ops share: the op
// that declares a resource outputs a variable reference holding the string
// vector [container, name] (TensorFlow's Ref(string) handle); the ops that
// use it take that reference, which keeps them on the resource's device,
// and look the resource up in their device's ResourceMgr.
//
// Stateless helpers; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace distflow {

// The container and shared_name attributes of a declaring op; an empty
// shared_name is the node's own name (private to the node, as in TensorFlow).
struct ResourceHandleAttrs {
  std::string container, shared_name;

  static absl::StatusOr<ResourceHandleAttrs> FromNode(const proto::NodeDef& def) {
    ResourceHandleAttrs a;
    absl::StatusOr<std::string> c = GetAttrString(def, "container");
    if (c.ok()) a.container = *c;
    absl::StatusOr<std::string> n = GetAttrString(def, "shared_name");
    if (n.ok()) a.shared_name = *n;
    if (a.shared_name.empty()) a.shared_name = def.name();
    return a;
  }
  std::string Container(const OpKernelContext* ctx) const {
    return container.empty() ? ctx->default_container() : container;
  }
};

inline std::shared_ptr<Var> MakeHandle(const std::string& container, const std::string& name) {
  auto v = std::make_shared<Var>(name, DT_STRING, PartialShape({2}));
  absl::MutexLock lock(v->mu());
  v->Set(Tensor::FromVector(std::vector<std::string>{container, name}));
  return v;
}

// The resource of type T that Ref(string) input `i` names.
template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupByHandle(OpKernelContext* ctx, int i) {
  Var* handle = ctx->input_ref(i);
  if (handle == nullptr) return absl::InternalError(absl::StrCat("input ", i, " should be a resource handle"));
  ASSIGN_OR_RETURN(Tensor v, handle->Read());
  if (v.dtype() != DT_STRING || v.NumElements() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " should be a ", T::kTypeName, " handle (2 strings), got ", v.DebugString()));
  }
  auto f = v.flat<std::string>();
  return ctx->resource_manager()->Lookup<T>(f[0], f[1]);
}

}  // namespace distflow
