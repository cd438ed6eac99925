// Kernels of the queue ops (graph/ops/queue_ops.cc) over Queue resources
// (queue.h). The queue op outputs a handle, a variable reference holding
// [container, name]; the other ops look the queue up by it. Enqueue and
// dequeue ops are asynchronous: they hold no thread while they wait.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/shape_rules.h"
#include "kernels/cpu/queue.h"
#include "kernels/cpu/resource_handle.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

class QueueOp : public OpKernel {
 public:
  QueueOp(OpKernelConstruction* c, Queue::Kind kind) : OpKernel(c) { options_.kind = kind; }
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(handle_, ResourceHandleAttrs::FromNode(c->def()));
    options_.name = handle_.shared_name;
    ASSIGN_OR_RETURN(options_.dtypes, GetAttrTypeList(c->def(), "component_types"));
    if (options_.dtypes.empty()) return absl::InvalidArgumentError("A queue needs at least one component type");
    ASSIGN_OR_RETURN(std::vector<int64_t> flat, GetAttrIntList(c->def(), "shapes"));
    ASSIGN_OR_RETURN(options_.shapes, DecodeShapeList(flat, "attribute 'shapes'"));
    ASSIGN_OR_RETURN(options_.capacity, GetAttrInt(c->def(), "capacity"));
    if (options_.capacity == 0 || options_.capacity < -1) {
      return absl::InvalidArgumentError(absl::StrCat("capacity must be positive or -1, got ", options_.capacity));
    }
    if (options_.kind == Queue::Kind::kRandomShuffle) {
      ASSIGN_OR_RETURN(options_.min_after_dequeue, GetAttrInt(c->def(), "min_after_dequeue"));
      ASSIGN_OR_RETURN(int64_t seed, GetAttrInt(c->def(), "seed"));
      ASSIGN_OR_RETURN(int64_t seed2, GetAttrInt(c->def(), "seed2"));
      if (seed != 0 || seed2 != 0)
        options_.seed = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(seed2);
      if (options_.capacity >= 0 && options_.min_after_dequeue >= options_.capacity) {
        return absl::InvalidArgumentError(absl::StrCat("min_after_dequeue (", options_.min_after_dequeue,
                                                       ") must be below capacity (", options_.capacity, ")"));
      }
    }
    if (options_.kind == Queue::Kind::kPadding) {
      for (const PartialShape& s : options_.shapes) {
        if (s.unknown_rank()) return absl::InvalidArgumentError("A PaddingFIFOQueue needs the rank of every component");
      }
      if (options_.shapes.size() != options_.dtypes.size()) {
        return absl::InvalidArgumentError("A PaddingFIFOQueue needs one shape per component");
      }
    }
    if (!options_.shapes.empty() && options_.shapes.size() != options_.dtypes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("'shapes' holds ", options_.shapes.size(), " shapes for ",
                                                     options_.dtypes.size(), " component types"));
    }
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = handle_.Container(ctx);
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q,
                     ctx->resource_manager()->LookupOrCreate<Queue>(
                         container, handle_.shared_name, [this] { return std::make_shared<Queue>(options_); }));
    RETURN_IF_ERROR(q->MatchesOptions(options_));
    ctx->set_output_ref(0, MakeHandle(container, handle_.shared_name));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  ResourceHandleAttrs handle_;
  Queue::Options options_;
};

template <Queue::Kind kKind>
class QueueOpOf : public QueueOp {
 public:
  explicit QueueOpOf(OpKernelConstruction* c) : QueueOp(c, kKind) {}
};

absl::StatusOr<std::shared_ptr<Queue>> GetQueue(OpKernelContext* ctx, int input = 0) {
  return LookupByHandle<Queue>(ctx, input);
}

class EnqueueOp : public AsyncOpKernel {
 public:
  EnqueueOp(OpKernelConstruction* c, bool many) : AsyncOpKernel(c), many_(many) {}
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Queue>> q = GetQueue(ctx);
    if (!q.ok()) return done(q.status());
    Queue::Tuple tuple;
    for (int i = 1; i < ctx->num_inputs(); ++i) tuple.push_back(ctx->input(i));
    if (absl::Status s = (*q)->ValidateTuple(tuple, many_); !s.ok()) return done(s);
    std::vector<Queue::Tuple> elements;
    if (many_) {
      elements = Queue::Unbatch(tuple);
    } else {
      // A queue keeps its elements: lent memory (a numpy feed) is copied.
      for (Tensor& t : tuple) {
        if (t.buffer() != nullptr && t.buffer()->borrowed()) t = t.DeepCopy();
      }
      elements.push_back(std::move(tuple));
    }
    (*q)->Enqueue(*q, std::move(elements), ctx->cancellation_manager(), std::move(done));
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }

 private:
  const bool many_;
};

class DequeueOp : public AsyncOpKernel {
 public:
  DequeueOp(OpKernelConstruction* c, bool many, bool up_to) : AsyncOpKernel(c), many_(many), up_to_(up_to) {}
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Queue>> q = GetQueue(ctx);
    if (!q.ok()) return done(q.status());
    int64_t n = -1;
    if (many_) {
      const Tensor& t = ctx->input(1);
      if (t.dtype() != DT_INT32 || t.NumElements() != 1 || t.flat<int32_t>()[0] < 0) {
        return done(
            absl::InvalidArgumentError(absl::StrCat("Dequeuing from queue '", (*q)->options().name,
                                                    "': n must be one non-negative int32, got ", t.DebugString())));
      }
      n = t.flat<int32_t>()[0];
    }
    if (ctx->num_outputs() != static_cast<int>((*q)->options().dtypes.size())) {
      return done(absl::InvalidArgumentError(absl::StrCat("Queue '", (*q)->options().name, "' holds ",
                                                          (*q)->options().dtypes.size(),
                                                          " components; the op dequeues ", ctx->num_outputs())));
    }
    (*q)->Dequeue(*q, n, up_to_, ctx->cancellation_manager(),
                  [ctx, done = std::move(done)](absl::Status s, std::vector<Tensor> components) {
                    for (size_t i = 0; s.ok() && i < components.size(); ++i) {
                      s = ctx->set_output(static_cast<int>(i), std::move(components[i]));
                    }
                    done(s);
                  });
  }
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return 1; }

 private:
  const bool many_, up_to_;
};

class QueueCloseOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(cancel_, GetAttrBool(c->def(), "cancel_pending_enqueues"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, GetQueue(ctx));
    q->Close(cancel_);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  bool cancel_ = false;
};

class QueueSizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, GetQueue(ctx));
    return ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(q->Size())));
  }
  bool IsExpensive() const override { return false; }
};

class QueueIsClosedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, GetQueue(ctx));
    return ctx->set_output(0, Tensor::Scalar<bool>(q->IsClosed()));
  }
  bool IsExpensive() const override { return false; }
};

template <bool kMany>
class EnqueueOpOf : public EnqueueOp {
 public:
  explicit EnqueueOpOf(OpKernelConstruction* c) : EnqueueOp(c, kMany) {}
};
template <bool kMany, bool kUpTo>
class DequeueOpOf : public DequeueOp {
 public:
  explicit DequeueOpOf(OpKernelConstruction* c) : DequeueOp(c, kMany, kUpTo) {}
};

}  // namespace

void RegisterQueueKernels(KernelRegistry* r) {
  r->Register<QueueOpOf<Queue::Kind::kFifo>>("FIFOQueue", kCpu, DT_INVALID);
  r->Register<QueueOpOf<Queue::Kind::kPadding>>("PaddingFIFOQueue", kCpu, DT_INVALID);
  r->Register<QueueOpOf<Queue::Kind::kRandomShuffle>>("RandomShuffleQueue", kCpu, DT_INVALID);
  r->Register<EnqueueOpOf<false>>("QueueEnqueue", kCpu, DT_INVALID);
  r->Register<EnqueueOpOf<true>>("QueueEnqueueMany", kCpu, DT_INVALID);
  r->Register<DequeueOpOf<false, false>>("QueueDequeue", kCpu, DT_INVALID);
  r->Register<DequeueOpOf<true, false>>("QueueDequeueMany", kCpu, DT_INVALID);
  r->Register<DequeueOpOf<true, true>>("QueueDequeueUpTo", kCpu, DT_INVALID);
  r->Register<QueueCloseOp>("QueueClose", kCpu, DT_INVALID);
  r->Register<QueueSizeOp>("QueueSize", kCpu, DT_INVALID);
  r->Register<QueueIsClosedOp>("QueueIsClosed", kCpu, DT_INVALID);
}

}  // namespace distflow
