// ScatterAdd, ScatterSub and ScatterUpdate: rows of a variable updated in
// place, var[indices[i], ...] (+=, -=, =) updates[i, ...]. Duplicate ids
// accumulate for Add/Sub; for Update the last one wins. The variable's lock
// is held for the update; every id is checked first, so a bad id leaves the
// variable untouched and the error names the op, the node, the id and the
// number of rows.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/sparse_index.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

enum class ScatterKind { kAdd, kSub, kUpdate };

template <ScatterKind kKind>
class ScatterOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  // The updated rows, not the variable.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    return in.size() == 3 ? in[1].num_elements() + in[2].num_elements() : OpKernel::EstimatedWork(in);
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const char* op = kKind == ScatterKind::kAdd   ? "ScatterAdd"
                     : kKind == ScatterKind::kSub ? "ScatterSub"
                                                  : "ScatterUpdate";
    const std::shared_ptr<Var>& var = ctx->input_ref_ptr(0);
    if (var == nullptr)
      return absl::InternalError(absl::StrCat(op, " (node '", name(), "'): input 0 is not a variable"));
    const Tensor& indices = ctx->input(1);
    const Tensor& updates = ctx->input(2);
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, sparse_index::Read(indices, op, name(), "indices"));
    {
      absl::MutexLock lock(var->mu());
      ASSIGN_OR_RETURN(Tensor * value, var->MutableValue());
      if (value->dims() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, " (node '", name(), "'): variable '", var->name(), "' is a scalar; scatter updates rows"));
      }
      std::vector<int64_t> want(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end());
      for (int k = 1; k < value->dims(); ++k) want.push_back(value->dim_size(k));
      if (std::vector<int64_t>(updates.shape().dim_sizes().begin(), updates.shape().dim_sizes().end()) != want) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, " (node '", name(), "'): updates of shape ", updates.shape().DebugString(),
                         " do not match indices.shape + var.shape[1:] = ", kernel_util::DimsString(want),
                         " (variable '", var->name(), "' of shape ", value->shape().DebugString(), ")"));
      }
      if (updates.dtype() != value->dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(op, " (node '", name(), "'): updates are ",
                                                       DataTypeName(updates.dtype()), " but variable '", var->name(),
                                                       "' is ", DataTypeName(value->dtype())));
      }
      RETURN_IF_ERROR(sparse_index::CheckRange(ids, value->dim_size(0), op, name(), "indices"));
      const int64_t inner = sparse_index::InnerSize(value->shape(), 1);
      VisitDataType(value->dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* src = updates.flat<T>().data();
        T* dst = value->flat<T>().data();
        for (size_t i = 0; i < ids.size(); ++i) {
          T* row = dst + ids[i] * inner;
          const T* in = src + static_cast<int64_t>(i) * inner;
          if constexpr (kKind == ScatterKind::kUpdate) {
            std::copy(in, in + inner, row);
          } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            for (int64_t j = 0; j < inner; ++j) {
              if constexpr (kKind == ScatterKind::kAdd) {
                row[j] += in[j];
              } else {
                row[j] -= in[j];
              }
            }
          }
        }
      });
    }
    ctx->set_output_ref(0, var);
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterScatterKernels(KernelRegistry* r) {
  r->Register<ScatterOp<ScatterKind::kAdd>>("ScatterAdd", kCpu, DT_INVALID);
  r->Register<ScatterOp<ScatterKind::kSub>>("ScatterSub", kCpu, DT_INVALID);
  r->Register<ScatterOp<ScatterKind::kUpdate>>("ScatterUpdate", kCpu, DT_INVALID);
}

}  // namespace distflow
