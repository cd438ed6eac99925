// Kernels for ExpandDims and Squeeze (zero-copy reshapes of their input),
// Pad / PadV2 (constant padding; every padded dtype) and Where (coordinates
// of the true or non-zero elements, in row-major order, as int64).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

using kernel_util::DimsString;
using kernel_util::ReadInts;
using kernel_util::ReadScalarInt;

class ExpandDimsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(int64_t a, ReadScalarInt(ctx->input(1), "ExpandDims dim"));
    const int64_t rank = in.dims();
    if (a < -rank - 1 || a > rank) {
      return absl::InvalidArgumentError(absl::StrCat("ExpandDims: dim ", a, " is out of range [", -rank - 1, ", ", rank,
                                                     "] for shape ", in.shape().DebugString()));
    }
    if (a < 0) a += rank + 1;
    std::vector<int64_t> dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
    dims.insert(dims.begin() + a, 1);
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor out, in.Reshaped(shape));
    return ctx->set_output(0, std::move(out));
  }
};

class SqueezeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(axes_, GetAttrIntList(c->def(), "squeeze_dims"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const int64_t rank = in.dims();
    std::vector<bool> drop(static_cast<size_t>(rank), axes_.empty());
    for (int64_t a : axes_) {
      if (a < -rank || a >= rank) {
        return absl::InvalidArgumentError(absl::StrCat("Squeeze: axis ", a, " is out of range [", -rank, ", ", rank,
                                                       ") for shape ", in.shape().DebugString()));
      }
      if (a < 0) a += rank;
      if (in.dim_size(static_cast<int>(a)) != 1) {
        return absl::InvalidArgumentError(absl::StrCat("Squeeze: can not squeeze axis ", a, " of shape ",
                                                       in.shape().DebugString(), ": its size is not 1"));
      }
      drop[static_cast<size_t>(a)] = true;
    }
    std::vector<int64_t> dims;
    for (int64_t k = 0; k < rank; ++k) {
      const int64_t d = in.dim_size(static_cast<int>(k));
      if (!(drop[static_cast<size_t>(k)] && d == 1)) dims.push_back(d);
    }
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor out, in.Reshaped(shape));
    return ctx->set_output(0, std::move(out));
  }

 private:
  std::vector<int64_t> axes_;
};

// Pad (zeros) and PadV2 (input 2, a scalar, fills the border).
class PadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const Tensor& p = ctx->input(1);
    const int64_t rank = in.dims();
    if (p.dims() != 2 || p.dim_size(0) != rank || p.dim_size(1) != 2) {
      return absl::InvalidArgumentError(absl::StrCat("Pad: paddings must have shape [", rank, ", 2] for input of ",
                                                     "shape ", in.shape().DebugString(), ", got ",
                                                     p.shape().DebugString()));
    }
    Tensor flat_p = *p.Reshaped(TensorShape({2 * rank}));
    ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadInts(flat_p, "Pad paddings"));
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    for (int64_t k = 0; k < rank; ++k) {
      const int64_t lo = pads[static_cast<size_t>(2 * k)], hi = pads[static_cast<size_t>(2 * k + 1)];
      if (lo < 0 || hi < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Pad: paddings must be non-negative, got ", DimsString(pads), " for dimension ", k));
      }
      dims[static_cast<size_t>(k)] = in.dim_size(static_cast<int>(k)) + lo + hi;
    }
    if (ctx->num_inputs() == 3 && ctx->input(2).NumElements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("PadV2: constant_values must be a scalar, got shape ", ctx->input(2).shape().DebugString()));
    }
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T fill = ctx->num_inputs() == 3 ? ctx->input(2).flat<T>()[0] : T{};
      T* dst = out->flat<T>().data();
      std::fill(dst, dst + out->NumElements(), fill);
      const T* src = in.flat<T>().data();
      const int64_t n = in.NumElements();
      if (n == 0) return;
      // Each input row (innermost dimension) lands at its padded offset.
      const int64_t row = rank == 0 ? 1 : in.dim_size(static_cast<int>(rank - 1));
      std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(rank - 1, 0)), 0);
      for (int64_t start = 0; start < n; start += row) {
        int64_t off = 0;
        for (int64_t k = 0; k < rank; ++k) {
          const int64_t i = k < rank - 1 ? idx[static_cast<size_t>(k)] : 0;
          off = off * dims[static_cast<size_t>(k)] + i + pads[static_cast<size_t>(2 * k)];
        }
        std::copy(src + start, src + start + row, dst + off);
        for (int64_t k = rank - 2; k >= 0; --k) {
          if (++idx[static_cast<size_t>(k)] < in.dim_size(static_cast<int>(k))) break;
          idx[static_cast<size_t>(k)] = 0;
        }
      }
    });
    return absl::OkStatus();
  }
};

class WhereOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const int64_t rank = in.dims();
    std::vector<int64_t> hits;
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, std::string>) {
        const T* v = in.flat<T>().data();
        for (int64_t i = 0; i < in.NumElements(); ++i) {
          if (v[i] != T{}) hits.push_back(i);
        }
      }
    });
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({static_cast<int64_t>(hits.size()), rank})));
    int64_t* o = out->flat<int64_t>().data();
    for (int64_t h : hits) {
      for (int64_t k = rank - 1; k >= 0; --k) {
        const int64_t d = in.dim_size(static_cast<int>(k));
        o[k] = h % d;
        h /= d;
      }
      o += rank;
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterDimsKernels(KernelRegistry* r) {
  r->Register<ExpandDimsOp>("ExpandDims", kCpu, DT_INVALID);
  r->Register<SqueezeOp>("Squeeze", kCpu, DT_INVALID);
  r->Register<PadOp>("Pad", kCpu, DT_INVALID);
  r->Register<PadOp>("PadV2", kCpu, DT_INVALID);
  r->Register<WhereOp>("Where", kCpu, DT_INVALID);
}

}  // namespace distflow
