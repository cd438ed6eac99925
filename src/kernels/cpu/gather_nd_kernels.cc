// Kernels of GatherNd and ScatterNd (graph/ops/gather_nd_ops.cc). Index
// tuples of length k address params viewed as [d0, ..., d(k-1), inner]; each
// tuple becomes one flat slice number, every one checked before any write,
// so a bad tuple fails the step naming the op, the node, the position, the
// tuple and the shape, and leaves nothing half-written. Slices are copied
// (GatherNd) or added (ScatterNd, duplicates summed) as contiguous runs.
// ScatterNdUpdate and ScatterNdAdd write into a variable in place under its
// lock; TensorScatterUpdate writes into a copy of its input. Updates are
// applied in order, so the last of duplicate tuples wins an update.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/cpu/sparse_index.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

// The flat slice numbers of `indices` ([..., k]) into `dims` (whose first k
// entries the tuples address), each checked.
absl::StatusOr<std::vector<int64_t>> FlatSlices(const Tensor& indices, const std::vector<int64_t>& dims,
                                                const std::string& op, const std::string& node) {
  if (indices.dims() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): indices must be at least a vector, got ",
                                                   "shape ", indices.shape().DebugString()));
  }
  const int64_t k = indices.dim_size(indices.dims() - 1);
  if (k > static_cast<int64_t>(dims.size())) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): index tuples of length ", k,
                                                   " address more dimensions than the shape [",
                                                   absl::StrJoin(dims, ", "), "] has"));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> raw, sparse_index::Read(indices, op, node, "indices"));
  if (k == 0) {
    // Tuples of length 0 address the whole tensor, once per index row.
    int64_t rows = 1;
    for (int d = 0; d + 1 < indices.dims(); ++d) rows *= indices.dim_size(d);
    return std::vector<int64_t>(static_cast<size_t>(rows), 0);
  }
  const int64_t n = static_cast<int64_t>(raw.size()) / k;
  std::vector<int64_t> flat(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t f = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t v = raw[static_cast<size_t>(i * k + j)];
      const int64_t bound = dims[static_cast<size_t>(j)];
      if (v < 0 || v >= bound) {
        std::vector<int64_t> tuple(raw.begin() + i * k, raw.begin() + (i + 1) * k);
        return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): index tuple ", i, " = [",
                                                       absl::StrJoin(tuple, ", "), "] is out of bounds: ", "entry ", j,
                                                       " is not in [0, ", bound, ") for shape [",
                                                       absl::StrJoin(dims, ", "), "]"));
      }
      f = f * bound + v;
    }
    flat[static_cast<size_t>(i)] = f;
  }
  return flat;
}

std::vector<int64_t> DimsOf(const TensorShape& s) {
  return std::vector<int64_t>(s.dim_sizes().begin(), s.dim_sizes().end());
}

// inner = product of dims[k:].
int64_t Inner(const std::vector<int64_t>& dims, int64_t k) {
  int64_t n = 1;
  for (size_t d = static_cast<size_t>(k); d < dims.size(); ++d) n *= dims[d];
  return n;
}

class GatherNdOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& params = ctx->input(0);
    const Tensor& indices = ctx->input(1);
    const std::vector<int64_t> pdims = DimsOf(params.shape());
    ASSIGN_OR_RETURN(std::vector<int64_t> slices, FlatSlices(indices, pdims, "GatherNd", name()));
    const int64_t k = indices.dim_size(indices.dims() - 1);
    std::vector<int64_t> out_dims(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end() - 1);
    out_dims.insert(out_dims.end(), pdims.begin() + k, pdims.end());
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(out_dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t inner = Inner(pdims, k);
    VisitDataType(params.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = params.flat<T>().data();
      T* dst = out->flat<T>().data();
      for (size_t i = 0; i < slices.size(); ++i) {
        const T* from = src + slices[i] * inner;
        T* to = dst + static_cast<int64_t>(i) * inner;
        if constexpr (std::is_trivially_copyable_v<T>) {
          if (inner > 0) std::memcpy(to, from, static_cast<size_t>(inner) * sizeof(T));
        } else {
          std::copy(from, from + inner, to);
        }
      }
    });
    return absl::OkStatus();
  }
};

class ScatterNdOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const Tensor& updates = ctx->input(1);
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, sparse_index::Read(ctx->input(2), "ScatterNd", name(), "shape"));
    for (int64_t d : dims) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("ScatterNd (node '", name(), "'): shape [",
                                                       absl::StrJoin(dims, ", "), "] has a negative dimension"));
      }
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> slices, FlatSlices(indices, dims, "ScatterNd", name()));
    const int64_t k = indices.dim_size(indices.dims() - 1);
    std::vector<int64_t> want(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end() - 1);
    want.insert(want.end(), dims.begin() + k, dims.end());
    if (DimsOf(updates.shape()) != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("ScatterNd (node '", name(), "'): updates of shape ", updates.shape().DebugString(),
                       " do not match indices.shape[:-1] + shape[k:] = [", absl::StrJoin(want, ", "), "]"));
    }
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t inner = Inner(dims, k);
    VisitDataType(updates.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        T* dst = out->flat<T>().data();
        std::fill(dst, dst + out->NumElements(), T{});
        const T* src = updates.flat<T>().data();
        for (size_t i = 0; i < slices.size(); ++i) {
          T* to = dst + slices[i] * inner;
          const T* from = src + static_cast<int64_t>(i) * inner;
          for (int64_t j = 0; j < inner; ++j) to[j] += from[j];
        }
      }
    });
    return absl::OkStatus();
  }
};

// Writes the slices of `updates` into `target` at the tuples of `indices`:
// assigned (add == false) or added. Checks every tuple and the shapes
// before writing anything.
absl::Status ScatterNdInto(Tensor* target, const Tensor& indices, const Tensor& updates, bool add,
                           const std::string& op, const std::string& node, const std::string& what) {
  if (updates.dtype() != target->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): updates are ",
                                                   DataTypeName(updates.dtype()), " but ", what, " is ",
                                                   DataTypeName(target->dtype())));
  }
  const std::vector<int64_t> dims = DimsOf(target->shape());
  ASSIGN_OR_RETURN(std::vector<int64_t> slices, FlatSlices(indices, dims, op, node));
  const int64_t k = indices.dim_size(indices.dims() - 1);
  std::vector<int64_t> want(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end() - 1);
  want.insert(want.end(), dims.begin() + k, dims.end());
  if (DimsOf(updates.shape()) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " (node '", node, "'): updates of shape ", updates.shape().DebugString(),
                     " do not match indices.shape[:-1] + shape[k:] = [", absl::StrJoin(want, ", "), "] (", what,
                     " of shape ", target->shape().DebugString(), ")"));
  }
  const int64_t inner = Inner(dims, k);
  absl::Status st;
  VisitDataType(target->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = target->flat<T>().data();
    const T* src = updates.flat<T>().data();
    for (size_t i = 0; i < slices.size(); ++i) {
      T* to = dst + slices[i] * inner;
      const T* from = src + static_cast<int64_t>(i) * inner;
      if (!add) {
        std::copy(from, from + inner, to);
      } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        for (int64_t j = 0; j < inner; ++j) to[j] += from[j];
      } else {
        st = absl::InvalidArgumentError(
            absl::StrCat(op, " (node '", node, "'): cannot add ", DataTypeName(target->dtype()), " values"));
        return;
      }
    }
  });
  return st;
}

template <bool kAdd>
class ScatterNdVariableOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const char* op = kAdd ? "ScatterNdAdd" : "ScatterNdUpdate";
    const std::shared_ptr<Var>& var = ctx->input_ref_ptr(0);
    if (var == nullptr)
      return absl::InternalError(absl::StrCat(op, " (node '", name(), "'): input 0 is not a variable"));
    {
      absl::MutexLock lock(var->mu());
      ASSIGN_OR_RETURN(Tensor * value, var->MutableValue());
      RETURN_IF_ERROR(ScatterNdInto(value, ctx->input(1), ctx->input(2), kAdd, op, name(),
                                    absl::StrCat("variable '", var->name(), "'")));
    }
    ctx->set_output_ref(0, var);
    return absl::OkStatus();
  }
};

class TensorScatterUpdateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& tensor = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, tensor.shape()));
    VisitDataType(tensor.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* from = tensor.flat<T>().data();
      std::copy(from, from + tensor.NumElements(), out->flat<T>().data());
    });
    return ScatterNdInto(out, ctx->input(1), ctx->input(2), /*add=*/false, "TensorScatterUpdate", name(), "tensor");
  }
};

}  // namespace

void RegisterGatherNdKernels(KernelRegistry* r) {
  r->Register<GatherNdOp>("GatherNd", kCpu, DT_INVALID);
  r->Register<ScatterNdOp>("ScatterNd", kCpu, DT_INVALID);
  r->Register<ScatterNdVariableOp<false>>("ScatterNdUpdate", kCpu, DT_INVALID);
  r->Register<ScatterNdVariableOp<true>>("ScatterNdAdd", kCpu, DT_INVALID);
  r->Register<TensorScatterUpdateOp>("TensorScatterUpdate", kCpu, DT_INVALID);
}

}  // namespace distflow
