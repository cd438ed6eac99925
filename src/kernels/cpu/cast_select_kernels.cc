// Kernels for Cast (between float, double, int32, int64, uint8 and bool)
// and Select (TF1's: a scalar, elementwise or row-wise condition). Large
// inputs are split over the intra-op pool with ParallelFor.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

// ---------------------------------------------------------------------------
// Cast between float, double, int32, int64, uint8 and bool.

// Well-defined conversion: to bool is "!= 0"; float to integer truncates
// toward zero, saturates out-of-range values and maps NaN to 0; integer to
// integer wraps (two's complement); everything else is static_cast.
template <typename D, typename S>
D CastValue(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != S{0};
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {  // D is not bool here
    if (std::isnan(v)) return D{0};
    constexpr D lo = std::numeric_limits<D>::min();
    constexpr D hi = std::numeric_limits<D>::max();
    if (v <= static_cast<S>(lo)) return lo;
    // static_cast<S>(hi) may round up to 2^bits, which is out of range itself.
    if (v >= static_cast<S>(hi)) return hi;
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

bool IsCastableType(DataType dt) {
  return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT8 || dt == DT_BOOL;
}

class CastOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(src_, GetAttrType(c->def(), "SrcT"));
    ASSIGN_OR_RETURN(dst_, GetAttrType(c->def(), "DstT"));
    if (!IsCastableType(src_) || !IsCastableType(dst_)) {
      return absl::UnimplementedError(
          absl::StrCat("Cast from ", DataTypeName(src_), " to ", DataTypeName(dst_), " is not supported"));
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (x.dtype() != src_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cast expects an input of dtype ", DataTypeName(src_), " but got ", DataTypeName(x.dtype())));
    }
    if (src_ == dst_) return ctx->set_output(0, x);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();
    VisitDataType(src_, [&](auto src_tag) {
      using S = typename decltype(src_tag)::type;
      VisitDataType(dst_, [&](auto dst_tag) {
        using D = typename decltype(dst_tag)::type;
        if constexpr (!std::is_same_v<S, std::string> && !std::is_same_v<D, std::string>) {
          const S* in = x.flat<S>().data();
          D* o = out->flat<D>().data();
          ctx->ParallelFor(n, 2, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) o[i] = CastValue<D, S>(in[i]);
          });
        }
      });
    });
    return absl::OkStatus();
  }

 private:
  DataType src_ = DT_INVALID;
  DataType dst_ = DT_INVALID;
};

// ---------------------------------------------------------------------------
// Select(condition, t, e), TF1 semantics: condition is a scalar, has t's
// shape (elementwise choice), or is a vector over t's dimension 0 (row choice).

class SelectOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    if (t.shape() != e.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("'t' and 'e' must have the same shape: ", t.shape().DebugString(),
                                                     " vs ", e.shape().DebugString()));
    }
    if (t.dtype() != e.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("'t' and 'e' must have the same dtype: ", DataTypeName(t.dtype()),
                                                     " vs ", DataTypeName(e.dtype())));
    }
    if (cond.dims() == 0) return ctx->set_output(0, cond.scalar<bool>() ? t : e);
    const bool elementwise = cond.shape() == t.shape();
    const bool rows = !elementwise && cond.dims() == 1 && t.dims() > 1 && cond.dim_size(0) == t.dim_size(0);
    if (!elementwise && !rows) {
      return absl::InvalidArgumentError(absl::StrCat("condition of shape ", cond.shape().DebugString(),
                                                     " must be a scalar, match the shape of 't' ",
                                                     t.shape().DebugString(), ", or be a vector of its dimension 0"));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, t.shape()));
    if (t.NumElements() == 0) return absl::OkStatus();
    const bool* c = cond.flat<bool>().data();
    VisitDataType(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* tp = t.flat<T>().data();
      const T* ep = e.flat<T>().data();
      T* o = out->flat<T>().data();
      if (elementwise) {
        ctx->ParallelFor(t.NumElements(), 2, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) o[i] = c[i] ? tp[i] : ep[i];
        });
      } else {
        const int64_t num_rows = t.dim_size(0);
        const int64_t row = t.NumElements() / num_rows;
        ctx->ParallelFor(num_rows, row, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const T* src = (c[r] ? tp : ep) + r * row;
            std::copy(src, src + row, o + r * row);
          }
        });
      }
    });
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCastSelectKernels(KernelRegistry* r) {
  r->Register<CastOp>("Cast", kCpu, DT_INVALID, "SrcT");
  r->Register<SelectOp>("Select", kCpu, DT_INVALID);
}

}  // namespace distflow
