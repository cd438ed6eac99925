// Kernels of the control-flow ops. They only move values: which outputs are
// dead, and which frame and iteration a value goes to, is the executor's
// (runtime/executor_frames.h). A Switch leaves its untaken output unset,
// which the executor treats as dead; a Merge is given only its live input.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

class SwitchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& pred = ctx->input(1);
    if (pred.dtype() != DT_BOOL || pred.shape().dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pred must be a scalar bool, got shape ", pred.shape().DebugString()));
    }
    return ctx->set_output(pred.scalar<bool>() ? 1 : 0, ctx->input(0));
  }
  bool IsExpensive() const override { return false; }
};

class MergeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (!ctx->input(i).IsInitialized()) continue;
      RETURN_IF_ERROR(ctx->set_output(0, ctx->input(i)));
      return ctx->set_output(1, Tensor::Scalar<int32_t>(i));
    }
    return absl::InternalError("Merge ran without a live input");
  }
  bool IsExpensive() const override { return false; }
};

// Enter, Exit, NextIteration, LoopCond: the value passes through.
class ForwardOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return ctx->set_output(0, ctx->input(0)); }
  bool IsExpensive() const override { return false; }
};

class ControlTriggerOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext*) override { return absl::OkStatus(); }
  bool IsExpensive() const override { return false; }
};

class AssertOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(summarize_, GetAttrInt(c->def(), "summarize"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    if (cond.dtype() != DT_BOOL || cond.shape().dims() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Assert '", name(), "': condition must be a scalar bool, got shape ", cond.shape().DebugString()));
    }
    if (cond.scalar<bool>()) return absl::OkStatus();
    std::string msg = "assertion failed: ";
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      const Tensor& t = ctx->input(i);
      if (i > 1) msg += " ";
      if (t.dtype() == DT_STRING && t.shape().dims() == 0) {
        absl::StrAppend(&msg, "[", t.scalar<std::string>(), "]");
      } else {
        absl::StrAppend(&msg, "[", t.DebugString(summarize_, static_cast<int>(summarize_)), "]");
      }
    }
    return absl::InvalidArgumentError(msg);
  }
  bool IsExpensive() const override { return false; }

 private:
  int64_t summarize_ = 3;
};

}  // namespace

void RegisterControlFlowKernels(KernelRegistry* r) {
  r->Register<SwitchOp>("Switch", kCpu, DT_INVALID);
  r->Register<MergeOp>("Merge", kCpu, DT_INVALID);
  r->Register<ForwardOp>("Enter", kCpu, DT_INVALID);
  r->Register<ForwardOp>("Exit", kCpu, DT_INVALID);
  r->Register<ForwardOp>("NextIteration", kCpu, DT_INVALID);
  r->Register<ForwardOp>("LoopCond", kCpu, DT_INVALID);
  r->Register<ControlTriggerOp>("ControlTrigger", kCpu, DT_INVALID);
  r->Register<AssertOp>("Assert", kCpu, DT_INVALID);
}

}  // namespace distflow
