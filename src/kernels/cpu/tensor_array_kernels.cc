// Kernels of the TensorArray ops (graph/ops/tensor_array_ops.cc) over
// TensorArray resources of the step's container (tensor_array.h). The
// handle is a string vector [container, name]; every array gets a name of
// its own (the op's name and a counter), so one node run in several
// iterations or steps makes distinct arrays. The flow outputs are 0: only
// their dependencies matter.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/tensor_array.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

absl::Status SetFlow(OpKernelContext* ctx, int i) { return ctx->set_output(i, Tensor::Scalar<float>(0.0f)); }

Tensor HandleTensor(const std::string& container, const std::string& name) {
  return Tensor::FromVector(std::vector<std::string>{container, name});
}

absl::StatusOr<std::shared_ptr<TensorArray>> Lookup(OpKernelContext* ctx, int i) {
  const Tensor& h = ctx->input(i);
  if (h.dtype() != DT_STRING || h.NumElements() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", i, " should be a TensorArray handle (2 strings), got ", h.DebugString()));
  }
  auto f = h.flat<std::string>();
  absl::StatusOr<std::shared_ptr<TensorArray>> ta = ctx->resource_manager()->Lookup<TensorArray>(f[0], f[1]);
  if (absl::IsNotFound(ta.status())) {
    return absl::NotFoundError(absl::StrCat("TensorArray '", f[1],
                                            "' does not exist in this step: a TensorArray lives ",
                                            "for the step that made it (a handle fetched in one run cannot be used in "
                                            "another), on the device of its TensorArrayV3 op"));
  }
  return ta;
}

absl::StatusOr<int64_t> ScalarIndex(const Tensor& t, const char* what) {
  if (t.NumElements() != 1 || t.dims() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  return t.dtype() == DT_INT64 ? t.scalar<int64_t>() : static_cast<int64_t>(t.scalar<int32_t>());
}

std::vector<int64_t> IntVector(const Tensor& t) {
  std::vector<int64_t> v;
  if (t.dtype() == DT_INT64) {
    for (int64_t x : t.flat<int64_t>()) v.push_back(x);
  } else {
    for (int32_t x : t.flat<int32_t>()) v.push_back(x);
  }
  return v;
}

PartialShape ShapeAttr(OpKernelConstruction* c, const char* name) {
  absl::StatusOr<PartialShape> s = GetAttrShape(c->def(), name);
  return s.ok() ? *s : PartialShape::Unknown();
}

class TensorArrayOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(options_.dtype, GetAttrType(c->def(), "dtype"));
    options_.element_shape = ShapeAttr(c, "element_shape");
    absl::StatusOr<bool> dynamic = GetAttrBool(c->def(), "dynamic_size");
    options_.dynamic_size = dynamic.ok() && *dynamic;
    absl::StatusOr<std::string> name = GetAttrString(c->def(), "tensor_array_name");
    options_.name = name.ok() && !name->empty() ? *name : c->def().name();
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t size, ScalarIndex(ctx->input(0), "TensorArray size"));
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat("TensorArray '", options_.name, "': size ", size, " < 0"));
    }
    TensorArray::Options o = options_;
    o.size = size;
    const std::string container = StepContainer(ctx->step_id());
    // Unique in the process: runs of other sessions' kernels may share the
    // step container (HoldStepContainer).
    static std::atomic<int64_t> next{0};
    const std::string unique = absl::StrCat(options_.name, "#", next.fetch_add(1, std::memory_order_relaxed));
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta,
                     ctx->resource_manager()->LookupOrCreate<TensorArray>(
                         container, unique, [&o] { return std::make_shared<TensorArray>(o); }));
    (void)ta;
    RETURN_IF_ERROR(ctx->set_output(0, HandleTensor(container, unique)));
    return SetFlow(ctx, 1);
  }
  bool IsExpensive() const override { return false; }

 private:
  TensorArray::Options options_;
};

class TensorArrayGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(source_, GetAttrString(c->def(), "source"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> forward, Lookup(ctx, 0));
    auto f = ctx->input(0).flat<std::string>();
    const std::string name = absl::StrCat(f[1], "@", source_);
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> grad,
                     ctx->resource_manager()->LookupOrCreate<TensorArray>(
                         f[0], name, [&] { return std::make_shared<TensorArray>(forward->GradientOptions(source_)); }));
    (void)grad;
    RETURN_IF_ERROR(ctx->set_output(0, HandleTensor(f[0], name)));
    return ctx->set_output(1, ctx->input(1));
  }
  bool IsExpensive() const override { return false; }

 private:
  std::string source_;
};

// The ops that write elements. `_rewrite` (set on the writes of a loop
// body that a loop's gradient rebuilds, which write again what the forward
// loop wrote) lets them write an index a second time.
class WritingOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> rewrite = GetAttrBool(c->def(), "_rewrite");
    rewrite_ = rewrite.ok() && *rewrite;
    return absl::OkStatus();
  }

 protected:
  bool rewrite_ = false;
};

class WriteOp : public WritingOp {
 public:
  using WritingOp::WritingOp;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    ASSIGN_OR_RETURN(int64_t index, ScalarIndex(ctx->input(1), "TensorArray write index"));
    RETURN_IF_ERROR(ta->Write(index, ctx->input(2), rewrite_));
    return SetFlow(ctx, 0);
  }
  bool IsExpensive() const override { return false; }
};

class ReadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    ASSIGN_OR_RETURN(int64_t index, ScalarIndex(ctx->input(1), "TensorArray read index"));
    ASSIGN_OR_RETURN(Tensor t, ta->Read(index));
    return ctx->set_output(0, std::move(t));
  }
  bool IsExpensive() const override { return false; }
};

class GatherOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    element_shape_ = ShapeAttr(c, "element_shape");
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    if (ctx->input(1).dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("TensorArray '", ta->name(), "': gather's indices must be a ",
                                                     "vector, got shape ", ctx->input(1).shape().DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor t, ta->Gather(IntVector(ctx->input(1)), element_shape_));
    return ctx->set_output(0, std::move(t));
  }

 private:
  PartialShape element_shape_;
};

// Element i of `value` along dimension 0, sharing its buffer.
absl::StatusOr<Tensor> Row(const Tensor& value, int64_t begin, int64_t end, bool drop_dim) {
  Tensor rows = value.Slice(begin, end);
  if (!drop_dim) return rows;
  TensorShape shape = value.shape();
  shape.RemoveDim(0);
  return rows.Reshaped(shape);
}

class ScatterOp : public WritingOp {
 public:
  using WritingOp::WritingOp;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    const Tensor& value = ctx->input(2);
    std::vector<int64_t> indices = IntVector(ctx->input(1));
    if (ctx->input(1).dims() != 1 || value.dims() < 1 || value.dim_size(0) != static_cast<int64_t>(indices.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorArray '", ta->name(), "': scatter needs a vector of indices and a value with one row per index; got ",
          "indices of shape ", ctx->input(1).shape().DebugString(), " and a value of shape ",
          value.shape().DebugString()));
    }
    for (size_t i = 0; i < indices.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor row, Row(value, static_cast<int64_t>(i), static_cast<int64_t>(i) + 1, true));
      RETURN_IF_ERROR(ta->Write(indices[i], row, rewrite_));
    }
    return SetFlow(ctx, 0);
  }
  bool IsExpensive() const override { return false; }
};

class SplitOp : public WritingOp {
 public:
  using WritingOp::WritingOp;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    const Tensor& value = ctx->input(1);
    std::vector<int64_t> lengths = IntVector(ctx->input(2));
    int64_t total = 0;
    for (int64_t n : lengths) {
      if (n < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("TensorArray '", ta->name(), "': split lengths must be >= 0, got ", n));
      }
      total += n;
    }
    if (ctx->input(2).dims() != 1 || value.dims() < 1 || value.dim_size(0) != total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorArray '", ta->name(), "': split's lengths (a vector) must sum to the first dimension of the value; ",
          "got lengths of shape ", ctx->input(2).shape().DebugString(), " summing to ", total, " and a value of shape ",
          value.shape().DebugString()));
    }
    int64_t at = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor piece, Row(value, at, at + lengths[i], false));
      RETURN_IF_ERROR(ta->Write(static_cast<int64_t>(i), piece, rewrite_));
      at += lengths[i];
    }
    return SetFlow(ctx, 0);
  }
  bool IsExpensive() const override { return false; }
};

class ConcatOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    element_shape_except0_ = ShapeAttr(c, "element_shape_except0");
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    Tensor value;
    std::vector<int64_t> lengths;
    RETURN_IF_ERROR(ta->Concat(element_shape_except0_, &value, &lengths));
    RETURN_IF_ERROR(ctx->set_output(0, std::move(value)));
    return ctx->set_output(1, Tensor::FromVector<int64_t>(lengths));
  }

 private:
  PartialShape element_shape_except0_;
};

class SizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> ta, Lookup(ctx, 0));
    return ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(ta->Size())));
  }
  bool IsExpensive() const override { return false; }
};

class CloseOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return Lookup(ctx, 0).status(); }
  bool IsExpensive() const override { return false; }
};

}  // namespace

void RegisterTensorArrayKernels(KernelRegistry* r) {
  r->Register<TensorArrayOp>("TensorArrayV3", kCpu, DT_INVALID);
  r->Register<TensorArrayGradOp>("TensorArrayGradV3", kCpu, DT_INVALID);
  r->Register<WriteOp>("TensorArrayWriteV3", kCpu, DT_INVALID);
  r->Register<ReadOp>("TensorArrayReadV3", kCpu, DT_INVALID);
  r->Register<GatherOp>("TensorArrayGatherV3", kCpu, DT_INVALID);
  r->Register<ScatterOp>("TensorArrayScatterV3", kCpu, DT_INVALID);
  r->Register<SplitOp>("TensorArraySplitV3", kCpu, DT_INVALID);
  r->Register<ConcatOp>("TensorArrayConcatV3", kCpu, DT_INVALID);
  r->Register<SizeOp>("TensorArraySizeV3", kCpu, DT_INVALID);
  r->Register<CloseOp>("TensorArrayCloseV3", kCpu, DT_INVALID);
}

}  // namespace distflow
