// Iterator ops: an IteratorResource in the task's ResourceMgr (named by the
// op's shared_name, else its node name) holds the current pass over a
// dataset. MakeIterator starts a new pass; OneShotIterator starts one only
// the first time; IteratorGetNext yields the next element, checked against
// the dtypes and shapes the graph declared, and OutOfRange at the end.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace data {
namespace {

// Thread-safe; GetNext calls are serialised.
class IteratorResource : public Resource {
 public:
  static constexpr char kTypeName[] = "Iterator";
  const char* type_name() const override { return kTypeName; }

  // Starts a new pass (the old one, and its prefetch thread, end here).
  absl::Status Reset(const DatasetPtr& dataset, bool only_if_unset) {
    absl::MutexLock lock(&mu_);
    if (only_if_unset && started_) return absl::OkStatus();
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> it, dataset->MakeIterator());
    it_ = std::move(it);
    dataset_ = dataset;
    started_ = true;
    return absl::OkStatus();
  }

  absl::Status GetNext(const std::string& name, Element* out, bool* end, DatasetPtr* dataset) {
    absl::MutexLock lock(&mu_);
    if (!started_) {
      return absl::FailedPreconditionError(
          absl::StrCat("Iterator '", name, "' is not initialized: run its initializer first"));
    }
    *dataset = dataset_;
    return it_->GetNext(out, end);
  }

 private:
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  DatasetPtr dataset_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<DatasetIterator> it_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::shared_ptr<IteratorResource>> LookupIterator(OpKernelContext* ctx, const std::string& name) {
  return ctx->resource_manager()->LookupOrCreate<IteratorResource>(ctx->default_container(), name,
                                                                   [] { return std::make_shared<IteratorResource>(); });
}

absl::StatusOr<std::string> IteratorName(OpKernelContext* ctx, int i) {
  const Tensor& t = ctx->input(i);
  if (t.dtype() != DT_STRING || t.NumElements() != 1) {
    return absl::InvalidArgumentError("The iterator input must be an iterator handle (a string scalar)");
  }
  return t.flat<std::string>()[0];
}

class IteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<std::string> s = GetAttrString(c->def(), "shared_name");
    shared_name_ = s.ok() && !s->empty() ? *s : c->def().name();
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(ctx, shared_name_));
    if (type_string() == "OneShotIterator") {
      DF_ASSIGN_OR_RETURN(DatasetPtr dataset, InputDataset(ctx, 0));
      RETURN_IF_ERROR(it->Reset(dataset, /*only_if_unset=*/true));
    }
    return ctx->set_output(0, Tensor::Scalar<std::string>(shared_name_));
  }
  bool IsExpensive() const override { return false; }

 private:
  std::string shared_name_;
};

class MakeIteratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr dataset, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(std::string name, IteratorName(ctx, 1));
    DF_ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(ctx, name));
    return it->Reset(dataset, /*only_if_unset=*/false);
  }
};

class IteratorGetNextOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<std::vector<int64_t>> code = GetAttrIntList(c->def(), "output_shapes");
    if (!code.ok() || code->empty()) return absl::OkStatus();
    for (size_t pos = 0; pos < code->size();) {
      const int64_t rank = (*code)[pos++];
      if (rank < 0) {
        shapes_.push_back(PartialShape::Unknown());
        continue;
      }
      shapes_.push_back(PartialShape(absl::Span<const int64_t>(code->data() + pos, static_cast<size_t>(rank))));
      pos += static_cast<size_t>(rank);
    }
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(std::string name, IteratorName(ctx, 0));
    DF_ASSIGN_OR_RETURN(std::shared_ptr<IteratorResource> it, LookupIterator(ctx, name));
    Element e;
    bool end = false;
    DatasetPtr dataset;
    RETURN_IF_ERROR(it->GetNext(name, &e, &end, &dataset));
    if (end) return absl::OutOfRangeError(absl::StrCat("End of sequence of iterator '", name, "'"));
    if (static_cast<int>(e.size()) != num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat("Iterator '", name, "' over ", dataset->DebugName(), " yields ",
                                                     e.size(), " components, but this op expects ", num_outputs()));
    }
    for (int i = 0; i < num_outputs(); ++i) {
      const Tensor& t = e[static_cast<size_t>(i)];
      if (t.dtype() != output_type(i)) {
        return absl::InvalidArgumentError(absl::StrCat("Iterator '", name, "' over ", dataset->DebugName(),
                                                       ": component ", i, " is ", DataTypeName(t.dtype()),
                                                       " but this op expects ", DataTypeName(output_type(i))));
      }
      if (static_cast<size_t>(i) < shapes_.size() && !shapes_[static_cast<size_t>(i)].IsCompatibleWith(t.shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Iterator '", name, "' over ", dataset->DebugName(), ": component ", i, " has shape ",
            t.shape().DebugString(), " but this op expects ", shapes_[static_cast<size_t>(i)].DebugString()));
      }
      RETURN_IF_ERROR(ctx->set_output(i, t));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<PartialShape> shapes_;
};

}  // namespace

void RegisterIteratorKernels(KernelRegistry* r) {
  r->Register<IteratorOp>("Iterator", kCpu, DT_INVALID);
  r->Register<IteratorOp>("OneShotIterator", kCpu, DT_INVALID);
  r->Register<MakeIteratorOp>("MakeIterator", kCpu, DT_INVALID);
  r->Register<IteratorGetNextOp>("IteratorGetNext", kCpu, DT_INVALID);
}

}  // namespace data
}  // namespace distflow
