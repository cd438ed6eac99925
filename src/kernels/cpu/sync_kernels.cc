// Kernels of the synchronous-training ops (graph/ops/sync_ops.cc): the
// conditional accumulator and the step barrier, both resources of the
// task's ResourceMgr. Ops that wait (AccumulatorWaitReady, SyncBarrierWait)
// are asynchronous: they park a callback on the resource and hold no thread;
// the callback runs when the resource's state satisfies it, when its
// deadline passes, or when its step is cancelled, whichever is first.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/sync_resources.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

using sync_training::Accumulator;
using sync_training::StepBarrier;

absl::StatusOr<int64_t> ScalarInt64(const OpKernelContext* ctx, int i, const char* what) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_INT64 || t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", what, "' must be one int64, got ", DataTypeName(t.dtype()), " ", t.shape().DebugString()));
  }
  return t.flat<int64_t>()[0];
}

// How many gradients a take needs: the `num_required` attribute, or, for
// the V2 ops (elastic synchronous training), their `num_required` input.
class RequiredCount {
 protected:
  absl::Status InitRequired(OpKernelConstruction* c) {
    dynamic_ = c->num_inputs() > 0;
    if (dynamic_) return absl::OkStatus();
    ASSIGN_OR_RETURN(int64_t v, GetAttrInt(c->def(), "num_required"));
    if (v < 1) return absl::InvalidArgumentError(absl::StrCat("'num_required' must be at least 1, got ", v));
    required_ = v;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> Required(const OpKernelContext* ctx) const {
    if (!dynamic_) return required_;
    ASSIGN_OR_RETURN(int64_t v, ScalarInt64(ctx, 0, "num_required"));
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'num_required' must be at least 1, got ", v, " (the number of gradients to average per step)"));
    }
    return v;
  }

 private:
  bool dynamic_ = false;
  int64_t required_ = 1;
};

// Reads the attributes every op here has.
class SyncKernelBase {
 protected:
  // An integer attribute to read, at least `min`, into `*out`.
  struct IntSpec {
    const char* attr;
    int64_t min;
    int64_t* out;
  };

  absl::Status InitBase(OpKernelConstruction* c, std::initializer_list<IntSpec> ints = {}) {
    for (const IntSpec& i : ints) {
      ASSIGN_OR_RETURN(int64_t v, IntAttr(c, i.attr, i.min));
      *i.out = v;
    }
    ASSIGN_OR_RETURN(std::string name, GetAttrString(c->def(), "shared_name"));
    if (name.empty()) return absl::InvalidArgumentError("'shared_name' must not be empty");
    shared_name_ = name;
    absl::StatusOr<std::string> container = GetAttrString(c->def(), "container");
    if (container.ok()) container_ = *container;
    absl::StatusOr<DataType> dtype = GetAttrType(c->def(), "T");
    if (dtype.ok()) dtype_ = *dtype;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> IntAttr(OpKernelConstruction* c, const char* attr, int64_t min) {
    ASSIGN_OR_RETURN(int64_t v, GetAttrInt(c->def(), attr));
    if (v < min) return absl::InvalidArgumentError(absl::StrCat("'", attr, "' must be at least ", min, ", got ", v));
    return v;
  }
  std::string Container(const OpKernelContext* ctx) const {
    return container_.empty() ? ctx->default_container() : container_;
  }
  absl::StatusOr<std::shared_ptr<Accumulator>> GetAccumulator(const OpKernelContext* ctx) const {
    if (dtype_ != DT_FLOAT && dtype_ != DT_DOUBLE) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradient accumulators hold float32 or float64, not ", DataTypeName(dtype_)));
    }
    return ctx->resource_manager()->LookupOrCreate<Accumulator>(
        Container(ctx), shared_name_, [this] { return std::make_shared<Accumulator>(shared_name_, dtype_); });
  }
  absl::StatusOr<std::shared_ptr<StepBarrier>> GetBarrier(const OpKernelContext* ctx) const {
    return ctx->resource_manager()->LookupOrCreate<StepBarrier>(
        Container(ctx), shared_name_, [this] { return std::make_shared<StepBarrier>(shared_name_); });
  }

  std::string shared_name_, container_;
  DataType dtype_ = DT_INVALID;
};

class AccumulatorApplyGradientOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c, {{"replica_id", 0, &replica_}}); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t local_step, ScalarInt64(ctx, 0, "local_step"));
    ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> acc, GetAccumulator(ctx));
    return acc->Apply(local_step, replica_, ctx->input(1));
  }

 private:
  int64_t replica_ = 0;
};

class AccumulatorWaitReadyOp : public AsyncOpKernel, SyncKernelBase, RequiredCount {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    int64_t timeout_ms = 0;
    if (absl::Status s = InitBase(c, {{"timeout_ms", 0, &timeout_ms}}); !s.ok()) return s;
    timeout_ = absl::Milliseconds(timeout_ms);
    return InitRequired(c);
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<int64_t> want = Required(ctx);
    if (!want.ok()) return done(want.status());
    absl::StatusOr<std::shared_ptr<Accumulator>> acc = GetAccumulator(ctx);
    if (!acc.ok()) return done(acc.status());
    Accumulator* a = acc->get();
    const int64_t required = *want;
    (*acc)->Park(
        *acc, [a, required]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return a->Ready(required); },
        [] { return absl::OkStatus(); },
        [ctx, done = std::move(done)](absl::Status s, bool satisfied) {
          if (s.ok()) s = ctx->set_output(0, Tensor::Scalar<bool>(satisfied));
          done(s);
        },
        timeout_, ctx->cancellation_manager());
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }

 private:
  absl::Duration timeout_;
};

class AccumulatorTakeGradientOp : public OpKernel, SyncKernelBase, RequiredCount {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    if (absl::Status s = InitBase(c); !s.ok()) return s;
    return InitRequired(c);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t required, Required(ctx));
    ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> acc, GetAccumulator(ctx));
    Tensor average;
    int64_t dropped = 0;
    if (absl::Status s = acc->Take(required, &average, &dropped); !s.ok()) return s;
    if (absl::Status s = ctx->set_output(0, std::move(average)); !s.ok()) return s;
    return ctx->set_output(1, Tensor::Scalar<int64_t>(dropped));
  }
};

class SparseAccumulatorApplyGradientOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c, {{"replica_id", 0, &replica_}}); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t local_step, ScalarInt64(ctx, 0, "local_step"));
    ASSIGN_OR_RETURN(int64_t num_rows, ScalarInt64(ctx, 3, "gradient_num_rows"));
    ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> acc, GetAccumulator(ctx));
    return acc->ApplySparse(local_step, replica_, ctx->input(1), ctx->input(2), num_rows);
  }

 private:
  int64_t replica_ = 0;
};

class SparseAccumulatorTakeGradientOp : public OpKernel, SyncKernelBase, RequiredCount {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    if (absl::Status s = InitBase(c); !s.ok()) return s;
    return InitRequired(c);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t required, Required(ctx));
    ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> acc, GetAccumulator(ctx));
    Tensor indices, values;
    int64_t num_rows = 0, dropped = 0;
    if (absl::Status s = acc->TakeSparse(required, &indices, &values, &num_rows, &dropped); !s.ok()) return s;
    if (absl::Status s = ctx->set_output(0, std::move(indices)); !s.ok()) return s;
    if (absl::Status s = ctx->set_output(1, std::move(values)); !s.ok()) return s;
    if (absl::Status s = ctx->set_output(2, Tensor::Scalar<int64_t>(num_rows)); !s.ok()) return s;
    return ctx->set_output(3, Tensor::Scalar<int64_t>(dropped));
  }
};

class AccumulatorSetGlobalStepOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t step, ScalarInt64(ctx, 0, "new_step"));
    ASSIGN_OR_RETURN(std::shared_ptr<Accumulator> acc, GetAccumulator(ctx));
    acc->SetGlobalStep(step);
    return absl::OkStatus();
  }
};

class SyncBarrierLocalStepOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c, {{"replica_id", 0, &replica_}}); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<StepBarrier> b, GetBarrier(ctx));
    return ctx->set_output(0, Tensor::Scalar<int64_t>(b->LocalStep(replica_)));
  }
  bool IsExpensive() const override { return false; }

 private:
  int64_t replica_ = 0;
};

class SyncBarrierWaitOp : public AsyncOpKernel, SyncKernelBase {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    int64_t timeout_ms = 0;
    RETURN_IF_ERROR(InitBase(c, {{"replica_id", 0, &replica_},
                                 {"replicas_to_aggregate", 1, &to_aggregate_},
                                 {"total_num_replicas", 1, &total_},
                                 {"timeout_ms", 1, &timeout_ms}}));
    if (to_aggregate_ > total_) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicas_to_aggregate (", to_aggregate_, ") is larger than total_num_replicas (", total_, ")"));
    }
    if (replica_ >= total_) {
      return absl::InvalidArgumentError(
          absl::StrCat("replica_id ", replica_, " is not below total_num_replicas (", total_, ")"));
    }
    timeout_ = absl::Milliseconds(timeout_ms);
    return absl::OkStatus();
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<int64_t> local_step = ScalarInt64(ctx, 0, "local_step");
    if (!local_step.ok()) return done(local_step.status());
    absl::StatusOr<std::shared_ptr<StepBarrier>> b = GetBarrier(ctx);
    if (!b.ok()) return done(b.status());
    (*b)->Wait(*b, *local_step, replica_, to_aggregate_, total_, timeout_, ctx->cancellation_manager(),
               [ctx, done = std::move(done)](absl::Status s, int64_t step) {
                 if (s.ok()) s = ctx->set_output(0, Tensor::Scalar<int64_t>(step));
                 done(s);
               });
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }

 private:
  int64_t replica_ = 0, to_aggregate_ = 1, total_ = 1;
  absl::Duration timeout_;
};

class SyncBarrierReleaseOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t step, ScalarInt64(ctx, 0, "step"));
    ASSIGN_OR_RETURN(std::shared_ptr<StepBarrier> b, GetBarrier(ctx));
    b->Release(step);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class SyncBarrierStatusOp : public OpKernel, SyncKernelBase {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return InitBase(c); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<StepBarrier> b, GetBarrier(ctx));
    int64_t step = -1;
    std::vector<int64_t> reported;
    b->Status(&step, &reported);
    if (absl::Status s = ctx->set_output(0, Tensor::Scalar<int64_t>(step)); !s.ok()) return s;
    return ctx->set_output(1, Tensor::FromVector(reported));
  }
  bool IsExpensive() const override { return false; }
};

}  // namespace

void RegisterSyncKernels(KernelRegistry* r) {
  r->Register<AccumulatorApplyGradientOp>("AccumulatorApplyGradient", kCpu, DT_INVALID);
  r->Register<AccumulatorWaitReadyOp>("AccumulatorWaitReady", kCpu, DT_INVALID);
  r->Register<AccumulatorTakeGradientOp>("AccumulatorTakeGradient", kCpu, DT_INVALID);
  r->Register<AccumulatorSetGlobalStepOp>("AccumulatorSetGlobalStep", kCpu, DT_INVALID);
  r->Register<SparseAccumulatorApplyGradientOp>("SparseAccumulatorApplyGradient", kCpu, DT_INVALID);
  r->Register<SparseAccumulatorTakeGradientOp>("SparseAccumulatorTakeGradient", kCpu, DT_INVALID);
  r->Register<AccumulatorWaitReadyOp>("AccumulatorWaitReadyV2", kCpu, DT_INVALID);
  r->Register<AccumulatorTakeGradientOp>("AccumulatorTakeGradientV2", kCpu, DT_INVALID);
  r->Register<SparseAccumulatorTakeGradientOp>("SparseAccumulatorTakeGradientV2", kCpu, DT_INVALID);
  r->Register<SyncBarrierLocalStepOp>("SyncBarrierLocalStep", kCpu, DT_INVALID);
  r->Register<SyncBarrierWaitOp>("SyncBarrierWait", kCpu, DT_INVALID);
  r->Register<SyncBarrierReleaseOp>("SyncBarrierRelease", kCpu, DT_INVALID);
  r->Register<SyncBarrierStatusOp>("SyncBarrierStatus", kCpu, DT_INVALID);
}

}  // namespace distflow
