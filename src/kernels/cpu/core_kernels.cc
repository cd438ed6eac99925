// Kernels for the core ops: Const, Placeholder, PlaceholderWithDefault,
// Identity, StopGradient, NoOp.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/kernel_registry.h"
#include "kernels/rendezvous.h"

namespace distflow {
namespace {

class ConstOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(Tensor v, GetAttrTensor(c->def(), "value"));
    value_ = std::move(v);
    return absl::OkStatus();
  }
  // Consumers never write to their inputs, so the constant is shared, not copied.
  absl::Status Compute(OpKernelContext* ctx) override { return ctx->set_output(0, value_); }
  bool IsExpensive() const override { return false; }

 private:
  Tensor value_;
};

class PlaceholderOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<PartialShape> s = GetAttrShape(c->def(), "shape");
    shape_ = s.ok() ? s->DebugString() : "<unknown>";
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    return absl::InvalidArgumentError(absl::StrCat("You must feed a value for placeholder '", name(), "' with dtype ",
                                                   DataTypeName(output_type(0)), " and shape ", shape_));
  }

 private:
  std::string shape_;
};

class IdentityOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return ctx->set_output(0, ctx->input(0)); }
  bool IsExpensive() const override { return false; }
};

class NoOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return absl::OkStatus(); }
  bool IsExpensive() const override { return false; }
};

class SendOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(std::string key, GetAttrString(c->def(), "key"));
    key_ = key;
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->rendezvous() == nullptr) return absl::FailedPreconditionError("_Send needs a distributed step");
    return ctx->rendezvous()->Send(ctx->step_id(), key_, ctx->input(0));
  }
  bool IsExpensive() const override { return false; }

 private:
  std::string key_;
};

class RecvOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(std::string key, GetAttrString(c->def(), "key"));
    ASSIGN_OR_RETURN(std::string task, GetAttrString(c->def(), "send_task"));
    key_ = key;
    send_task_ = task;
    // The partitioner's bundle: the keys that travel with this one.
    if (absl::StatusOr<std::vector<std::string>> bundle = GetAttrStringList(c->def(), "bundle"); bundle.ok()) {
      bundle_ = std::move(*bundle);
    }
    // The tensors this task sends `send_task` that ride with this bundle's
    // fetch, or (`pushed`) this tensor rides with a fetch from `send_task`.
    if (absl::StatusOr<std::vector<std::string>> push = GetAttrStringList(c->def(), "push"); push.ok()) {
      push_ = std::move(*push);
    }
    if (absl::StatusOr<bool> pushed = GetAttrBool(c->def(), "pushed"); pushed.ok()) pushed_ = *pushed;
    return absl::OkStatus();
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    if (ctx->rendezvous() == nullptr) {
      done(absl::FailedPreconditionError("_Recv needs a distributed step"));
      return;
    }
    auto got = [ctx, done = std::move(done)](absl::Status s, Tensor t) {
      // A dead send arrives as no tensor: the output stays unset (dead).
      if (s.ok() && t.IsInitialized()) s = ctx->set_output(0, std::move(t));
      done(s);
    };
    if (pushed_) {
      ctx->rendezvous()->RecvPushedAsync(ctx->step_id(), key_, send_task_, ctx->cancellation_manager(), std::move(got));
    } else if (!push_.empty()) {
      ctx->rendezvous()->RecvBundlePushingAsync(ctx->step_id(), key_, bundle_, push_, send_task_,
                                                ctx->cancellation_manager(), std::move(got));
    } else if (bundle_.size() > 1) {
      ctx->rendezvous()->RecvBundleAsync(ctx->step_id(), key_, bundle_, send_task_, ctx->cancellation_manager(),
                                         std::move(got));
    } else {
      ctx->rendezvous()->RecvAsync(ctx->step_id(), key_, send_task_, ctx->cancellation_manager(), std::move(got));
    }
  }

 private:
  std::string key_, send_task_;
  std::vector<std::string> bundle_, push_;
  bool pushed_ = false;
};

}  // namespace

void RegisterCoreKernels(KernelRegistry* r) {
  r->Register<SendOp>("_Send", kCpu, DT_INVALID);
  r->Register<RecvOp>("_Recv", kCpu, DT_INVALID);
  r->Register<ConstOp>("Const", kCpu, DT_INVALID);
  r->Register<PlaceholderOp>("Placeholder", kCpu, DT_INVALID);
  r->Register<IdentityOp>("PlaceholderWithDefault", kCpu, DT_INVALID);
  r->Register<IdentityOp>("Identity", kCpu, DT_INVALID);
  r->Register<IdentityOp>("StopGradient", kCpu, DT_INVALID);
  r->Register<NoOp>("NoOp", kCpu, DT_INVALID);
}

}  // namespace distflow
