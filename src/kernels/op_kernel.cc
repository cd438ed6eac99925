#include "kernels/op_kernel.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "kernels/device.h"

namespace distflow {

OpKernel::OpKernel(OpKernelConstruction* c)
    : name_(c->def().name()), op_(c->def().op()), output_types_([c] {
        std::vector<DataType> t;
        for (int i = 0; i < c->num_outputs(); ++i) t.push_back(c->output_type(i));
        return t;
      }()) {}

absl::Status AsyncOpKernel::Compute(OpKernelContext* ctx) {
  absl::Notification n;
  absl::Status result;
  ComputeAsync(ctx, [&](absl::Status s) {
    result = std::move(s);
    n.Notify();
  });
  n.WaitForNotification();
  return result;
}

OpKernelContext::OpKernelContext(Params params) : params_(std::move(params)) {
  size_t n = params_.kernel ? static_cast<size_t>(params_.kernel->num_outputs()) : 0;
  outputs_.resize(n);
  output_refs_.resize(n);
  if (params_.input_refs.size() < params_.inputs.size()) params_.input_refs.resize(params_.inputs.size());
}

absl::StatusOr<Tensor*> OpKernelContext::allocate_output(int i, const TensorShape& shape) {
  CHECK(i >= 0 && i < num_outputs()) << "allocate_output(" << i << ") on a kernel with " << num_outputs() << " outputs";
  const DataType dtype = params_.kernel->output_type(i);
  if (params_.step_bytes != nullptr && params_.max_step_bytes > 0 && dtype != DT_STRING) {
    const int64_t bytes = shape.num_elements() * static_cast<int64_t>(DataTypeSize(dtype));
    const int64_t before = params_.step_bytes->fetch_add(bytes);
    if (before + bytes > params_.max_step_bytes) {
      params_.step_bytes->fetch_sub(bytes);
      return absl::ResourceExhaustedError(absl::StrCat(
          "Its output ", shape.DebugString(), " (", bytes, " bytes) would take the memory the step's outputs hold on ",
          params_.device != nullptr ? params_.device->name() : std::string("this device"), " to ", before + bytes,
          " bytes, over the limit of ", params_.max_step_bytes,
          " bytes a step may hold there: raise it with --max_step_bytes (WorkerOptions::max_step_bytes, "
          "SessionOptions::max_step_bytes) or make the step smaller"));
    }
    absl::StatusOr<Tensor> t = Tensor::Allocate(dtype, shape);
    if (!t.ok()) {
      params_.step_bytes->fetch_sub(bytes);
      return t.status();
    }
    // The count goes down when the output's last tensor is gone.
    std::shared_ptr<TensorBuffer> inner = t->buffer();
    void* data = inner->data();
    const size_t size = inner->size();
    std::shared_ptr<TensorBuffer> counted =
        TensorBuffer::Wrap(data, size, [inner = std::move(inner), counter = params_.step_bytes, bytes]() mutable {
          inner.reset();
          counter->fetch_sub(bytes);
        });
    ASSIGN_OR_RETURN(Tensor out, Tensor::FromBuffer(dtype, shape, std::move(counted), 0));
    outputs_[static_cast<size_t>(i)] = std::move(out);
    return &outputs_[static_cast<size_t>(i)];
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  outputs_[static_cast<size_t>(i)] = std::move(t);
  return &outputs_[static_cast<size_t>(i)];
}

absl::Status OpKernelContext::set_output(int i, Tensor t) {
  CHECK(i >= 0 && i < num_outputs()) << "set_output(" << i << ") on a kernel with " << num_outputs() << " outputs";
  if (t.dtype() != params_.kernel->output_type(i)) {
    return absl::InternalError(absl::StrCat("output ", i, " should be ", DataTypeName(params_.kernel->output_type(i)),
                                            " but the kernel produced ", DataTypeName(t.dtype())));
  }
  outputs_[static_cast<size_t>(i)] = std::move(t);
  return absl::OkStatus();
}

void OpKernelContext::set_output_ref(int i, std::shared_ptr<Var> var) {
  CHECK(i >= 0 && i < num_outputs());
  output_refs_[static_cast<size_t>(i)] = std::move(var);
}

ResourceMgr* OpKernelContext::resource_manager() const {
  return params_.device ? params_.device->resource_manager() : nullptr;
}

void OpKernelContext::ParallelFor(int64_t n, int64_t cost_per_unit,
                                  const std::function<void(int64_t, int64_t)>& fn) const {
  // Splitting pays off above roughly 100k cycles of work per block.
  constexpr int64_t kMinCyclesPerBlock = 100000;
  ThreadPool* pool = params_.intra_op_pool;
  if (pool == nullptr || n <= 1 || n * std::max<int64_t>(cost_per_unit, 1) < 2 * kMinCyclesPerBlock) {
    fn(0, n);
    return;
  }
  int64_t min_block = std::max<int64_t>(1, kMinCyclesPerBlock / std::max<int64_t>(cost_per_unit, 1));
  pool->ParallelFor(n, min_block, fn);
}

int64_t OpKernel::EstimatedWork(const std::vector<TensorShape>& inputs) const {
  int64_t n = 0;
  for (const TensorShape& s : inputs) n += s.num_elements();
  return n;
}

}  // namespace distflow
