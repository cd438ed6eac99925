// Kernels for StridedSlice, StridedSliceGrad, Split and SplitV. StridedSlice
// resolves its spec with graph/strided_slice.h (the shape function's rules)
// and copies element by element along the innermost dimension; its gradient
// writes dy into zeros at the same positions. Split copies contiguous runs,
// and is zero-copy along dimension 0. Every dtype (typed via VisitDataType).
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/strided_slice.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

using kernel_util::DimsString;
using kernel_util::ReadInts;
using kernel_util::ReadScalarInt;

// Calls fn(big_offset, small_offset) for every element the dense spec
// selects, in row-major order of the slice; `dims` is the big tensor's shape.
template <typename Fn>
void ForEachSelected(absl::Span<const int64_t> dims, const StridedSliceDense& d, Fn&& fn) {
  const size_t rank = dims.size();
  std::vector<int64_t> stride_of(rank, 1);  // row-major element strides of the big tensor
  for (size_t k = rank; k-- > 1;) stride_of[k - 1] = stride_of[k] * dims[k];
  for (size_t k = 0; k < rank; ++k) {
    if (d.size[k] == 0) return;
  }
  if (rank == 0) {
    fn(0, 0);
    return;
  }
  const size_t last = rank - 1;
  int64_t rows = 1;
  for (size_t k = 0; k < last; ++k) rows *= d.size[k];
  kernel_util::ForEachRow(d.size, 0, rows, [&](int64_t r, const int64_t* idx) {
    int64_t base = d.begin[last];
    for (size_t k = 0; k < last; ++k) base += (d.begin[k] + idx[k] * d.stride[k]) * stride_of[k];
    for (int64_t j = 0; j < d.size[last]; ++j) fn(base + j * d.stride[last], r * d.size[last] + j);
  });
}

absl::StatusOr<StridedSliceDense> Resolve(const proto::NodeDef& def, absl::Span<const int64_t> dims,
                                          const Tensor& begin_t, const Tensor& end_t, const Tensor& strides_t) {
  ASSIGN_OR_RETURN(StridedSliceMasks masks, ReadStridedSliceMasks(def));
  ASSIGN_OR_RETURN(std::vector<int64_t> begin, ReadInts(begin_t, "StridedSlice begin"));
  ASSIGN_OR_RETURN(std::vector<int64_t> end, ReadInts(end_t, "StridedSlice end"));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ReadInts(strides_t, "StridedSlice strides"));
  return ResolveStridedSlice(dims, std::optional(begin), std::optional(end), strides, masks);
}

class StridedSliceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    def_ = c->def();
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(StridedSliceDense d,
                     Resolve(def_, in.shape().dim_sizes(), ctx->input(1), ctx->input(2), ctx->input(3)));
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(d.output_shape));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = in.flat<T>().data();
      T* dst = out->flat<T>().data();
      ForEachSelected(in.shape().dim_sizes(), d, [&](int64_t big, int64_t small) { dst[small] = src[big]; });
    });
    return absl::OkStatus();
  }

 private:
  proto::NodeDef def_;
};

class StridedSliceGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    def_ = c->def();
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(ctx->input(0), "StridedSliceGrad shape"));
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(StridedSliceDense d, Resolve(def_, dims, ctx->input(1), ctx->input(2), ctx->input(3)));
    const Tensor& dy = ctx->input(4);
    ASSIGN_OR_RETURN(TensorShape want, TensorShape::FromDims(d.output_shape));
    if (dy.shape() != want) {
      return absl::InvalidArgumentError(absl::StrCat("StridedSliceGrad: dy has shape ", dy.shape().DebugString(),
                                                     " but the slice of ", DimsString(dims), " has shape ",
                                                     want.DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    VisitDataType(dy.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = dy.flat<T>().data();
      T* dst = out->flat<T>().data();
      std::fill(dst, dst + out->NumElements(), T{});
      ForEachSelected(dims, d, [&](int64_t big, int64_t small) { dst[big] = src[small]; });
    });
    return absl::OkStatus();
  }

 private:
  proto::NodeDef def_;
};

// Splits `in` along `axis` into parts of `sizes` (which sum to its size).
absl::Status SplitInto(OpKernelContext* ctx, const Tensor& in, int64_t axis, const std::vector<int64_t>& sizes) {
  const int64_t rank = in.dims();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= in.dim_size(static_cast<int>(k));
  for (int64_t k = axis + 1; k < rank; ++k) inner *= in.dim_size(static_cast<int>(k));
  const int64_t dim = in.dim_size(static_cast<int>(axis));
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
    dims[static_cast<size_t>(axis)] = sizes[i];
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    if (axis == 0) {
      ASSIGN_OR_RETURN(Tensor part, in.Slice(offset, offset + sizes[i]).Reshaped(shape));
      RETURN_IF_ERROR(ctx->set_output(static_cast<int>(i), std::move(part)));
    } else {
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(static_cast<int>(i), shape));
      VisitDataType(in.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* src = in.flat<T>().data();
        T* dst = out->flat<T>().data();
        const int64_t run = sizes[i] * inner;
        for (int64_t o = 0; o < outer; ++o) {
          std::copy(src + (o * dim + offset) * inner, src + (o * dim + offset) * inner + run, dst + o * run);
        }
      });
    }
    offset += sizes[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SplitAxis(const Tensor& axis_t, const Tensor& in, const char* op) {
  ASSIGN_OR_RETURN(int64_t axis, ReadScalarInt(axis_t, absl::StrCat(op, " split_dim")));
  const int64_t rank = in.dims();
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " is out of range [", -rank, ", ", rank,
                                                   ") for shape ", in.shape().DebugString()));
  }
  return axis < 0 ? axis + rank : axis;
}

class SplitOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(1);
    ASSIGN_OR_RETURN(int64_t axis, SplitAxis(ctx->input(0), in, "Split"));
    const int64_t n = ctx->num_outputs(), dim = in.dim_size(static_cast<int>(axis));
    if (dim % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Split: dimension ", axis, " of shape ", in.shape().DebugString(),
                                                     " (size ", dim, ") is not divisible by num_split = ", n));
    }
    return SplitInto(ctx, in, axis, std::vector<int64_t>(static_cast<size_t>(n), dim / n));
  }
};

class SplitVOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReadInts(ctx->input(1), "SplitV size_splits"));
    ASSIGN_OR_RETURN(int64_t axis, SplitAxis(ctx->input(2), in, "SplitV"));
    const int64_t dim = in.dim_size(static_cast<int>(axis));
    if (static_cast<int>(sizes.size()) != ctx->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits ", DimsString(sizes), " has ", sizes.size(),
                                                     " entries but num_split = ", ctx->num_outputs()));
    }
    int64_t known = 0;
    int unknown_at = -1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == -1 && unknown_at < 0) {
        unknown_at = static_cast<int>(i);
      } else if (sizes[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("SplitV: size_splits ", DimsString(sizes), " may hold one -1; other sizes must be >= 0"));
      } else {
        known += sizes[i];
      }
    }
    if (known > dim || (unknown_at < 0 && known != dim)) {
      return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits ", DimsString(sizes), " do not add up to ",
                                                     "dimension ", axis, " of shape ", in.shape().DebugString()));
    }
    if (unknown_at >= 0) sizes[static_cast<size_t>(unknown_at)] = dim - known;
    return SplitInto(ctx, in, axis, sizes);
  }
};

}  // namespace

void RegisterSliceKernels(KernelRegistry* r) {
  r->Register<StridedSliceOp>("StridedSlice", kCpu, DT_INVALID);
  r->Register<StridedSliceGradOp>("StridedSliceGrad", kCpu, DT_INVALID);
  r->Register<SplitOp>("Split", kCpu, DT_INVALID);
  r->Register<SplitVOp>("SplitV", kCpu, DT_INVALID);
}

}  // namespace distflow
