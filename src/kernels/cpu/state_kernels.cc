// Kernels for variables: Variable, Assign, AssignAdd, AssignSub,
// IsVariableInitialized. The variable lives in the device's ResourceMgr.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

class VariableOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(PartialShape shape, GetAttrShape(c->def(), "shape"));
    shape_ = shape;
    ASSIGN_OR_RETURN(DataType dtype, GetAttrType(c->def(), "dtype"));
    dtype_ = dtype;
    absl::StatusOr<std::string> container = GetAttrString(c->def(), "container");
    absl::StatusOr<std::string> shared = GetAttrString(c->def(), "shared_name");
    container_ = container.ok() ? *container : "";
    shared_name_ = shared.ok() && !shared->empty() ? *shared : c->def().name();
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ResourceMgr* rm = ctx->resource_manager();
    if (rm == nullptr) return absl::InternalError("Variable op run without a device");
    const std::string& container = container_.empty() ? ctx->default_container() : container_;
    ASSIGN_OR_RETURN(std::shared_ptr<Var> var, rm->LookupOrCreateVar(container, shared_name_, dtype_, shape_));
    ctx->set_output_ref(0, std::move(var));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  PartialShape shape_;
  DataType dtype_ = DT_INVALID;
  std::string container_, shared_name_;
};

class AssignOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> v = GetAttrBool(c->def(), "validate_shape");
    validate_shape_ = !v.ok() || *v;
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::shared_ptr<Var>& var = ctx->input_ref_ptr(0);
    const Tensor& value = ctx->input(1);
    {
      absl::MutexLock lock(var->mu());
      if (validate_shape_) {
        if (!var->declared_shape().IsCompatibleWith(value.shape())) {
          return absl::InvalidArgumentError(absl::StrCat("Cannot assign a tensor of shape ",
                                                         value.shape().DebugString(), " to variable '", var->name(),
                                                         "' of shape ", var->declared_shape().DebugString()));
        }
        if (var->is_initialized() && var->value().shape() != value.shape()) {
          return absl::InvalidArgumentError(absl::StrCat("Cannot assign a tensor of shape ",
                                                         value.shape().DebugString(), " to variable '", var->name(),
                                                         "' holding shape ", var->value().shape().DebugString()));
        }
      }
      var->Set(value);  // shares the buffer; a later in-place update copies first
    }
    ctx->set_output_ref(0, var);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  bool validate_shape_ = true;
};

template <typename T, bool kAdd>
class AssignUpdateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::shared_ptr<Var>& var = ctx->input_ref_ptr(0);
    const Tensor& delta = ctx->input(1);
    {
      absl::MutexLock lock(var->mu());
      ASSIGN_OR_RETURN(Tensor * value, var->MutableValue());
      if (value->shape() != delta.shape()) {
        return absl::InvalidArgumentError(absl::StrCat("Update of shape ", delta.shape().DebugString(),
                                                       " does not match variable '", var->name(), "' of shape ",
                                                       value->shape().DebugString()));
      }
      auto dst = value->flat<T>();
      auto src = delta.flat<T>();
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = kAdd ? dst[i] + src[i] : dst[i] - src[i];
    }
    ctx->set_output_ref(0, var);
    return absl::OkStatus();
  }
};

class IsVariableInitializedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    Var* var = ctx->input_ref(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
    absl::ReaderMutexLock lock(var->mu());
    out->scalar<bool>() = var->is_initialized();
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

template <typename T>
void RegisterUpdates(KernelRegistry* r) {
  r->Register<AssignUpdateOp<T, true>>("AssignAdd", kCpu, DataTypeToEnum<T>::value);
  r->Register<AssignUpdateOp<T, false>>("AssignSub", kCpu, DataTypeToEnum<T>::value);
}

}  // namespace

void RegisterStateKernels(KernelRegistry* r) {
  r->Register<VariableOp>("Variable", kCpu, DT_INVALID);
  r->Register<AssignOp>("Assign", kCpu, DT_INVALID);
  r->Register<IsVariableInitializedOp>("IsVariableInitialized", kCpu, DT_INVALID);
  RegisterUpdates<float>(r);
  RegisterUpdates<double>(r);
  RegisterUpdates<int32_t>(r);
  RegisterUpdates<int64_t>(r);
}

}  // namespace distflow
