// CPU kernels for the reduction ops (see graph/ops/reduction_ops.cc).
//
// Sum/Mean/Max/Min/Prod drop size-1 dimensions and merge adjacent dimensions
// that are all reduced or all kept, so the input becomes an alternation
// [K0, R0, K1, R1, ...]. Each reduced group is then folded away, last first,
// viewing the data as [outer, reduce, inner]: a contiguous reduction when
// inner == 1, else row-wise accumulation that vectorises over inner.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/shape_rules.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

// Integer arithmetic wraps (like TF's) instead of being undefined on overflow.
template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
struct SumReducer {
  static T Init() { return T(0); }
  static T Op(T a, T b) { return WrapAdd(a, b); }
};
template <typename T>
struct ProdReducer {
  static T Init() { return T(1); }
  static T Op(T a, T b) { return WrapMul(a, b); }
};
template <typename T>
struct MaxReducer {
  static T Init() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  // NaN propagates, as in TF.
  static T Op(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(b)) return b;
    }
    return b > a ? b : a;
  }
};
template <typename T>
struct MinReducer {
  static T Init() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  static T Op(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};

// Reduces the contiguous range [p, p + n) with 8 independent accumulators
// (vectorisable, and more accurate for float sums than one running total).
template <typename T, typename R>
T ReduceContiguous(const T* p, int64_t n) {
  T acc[8];
  for (T& a : acc) a = R::Init();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] = R::Op(acc[k], p[i + k]);
  }
  for (; i < n; ++i) acc[0] = R::Op(acc[0], p[i]);
  T r = acc[0];
  for (int k = 1; k < 8; ++k) r = R::Op(r, acc[k]);
  return r;
}

// out[o, i] = reduce_r in[o, r, i].
template <typename T, typename R>
void Reduce3(OpKernelContext* ctx, const T* in, int64_t outer, int64_t n, int64_t inner, T* out) {
  if (inner == 1) {
    if (outer == 1) {
      // A full reduction: split it into chunks reduced in parallel.
      constexpr int64_t kChunk = 1 << 16;
      int64_t chunks = (n + kChunk - 1) / kChunk;
      if (chunks <= 1) {
        out[0] = ReduceContiguous<T, R>(in, n);
        return;
      }
      std::vector<T> partial(static_cast<size_t>(chunks));
      ctx->ParallelFor(chunks, kChunk, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
          partial[static_cast<size_t>(c)] = ReduceContiguous<T, R>(in + lo, hi - lo);
        }
      });
      out[0] = ReduceContiguous<T, R>(partial.data(), chunks);
      return;
    }
    ctx->ParallelFor(outer, n, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) out[o] = ReduceContiguous<T, R>(in + o * n, n);
    });
    return;
  }
  // Blocks of inner columns, so that small outer still parallelises.
  constexpr int64_t kBlock = 1024;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  ctx->ParallelFor(outer * blocks, n * std::min(inner, kBlock), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      int64_t o = u / blocks, lo = (u % blocks) * kBlock, hi = std::min(inner, lo + kBlock);
      T* dst = out + o * inner;
      std::fill(dst + lo, dst + hi, R::Init());
      const T* src = in + o * n * inner;
      for (int64_t r = 0; r < n; ++r) {
        const T* row = src + r * inner;
        for (int64_t i = lo; i < hi; ++i) dst[i] = R::Op(dst[i], row[i]);
      }
    }
  });
}

struct Group {
  int64_t size;
  bool reduced;
};

// Validated axes as a per-dimension mask.
absl::StatusOr<std::vector<bool>> AxesMask(const Tensor& axes, int rank) {
  if (axes.dims() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduction_indices must be a scalar or vector, got shape ", axes.shape().DebugString()));
  }
  std::vector<int64_t> v;
  if (axes.dtype() == DT_INT32) {
    for (int32_t a : axes.flat<int32_t>()) v.push_back(a);
  } else if (axes.dtype() == DT_INT64) {
    for (int64_t a : axes.flat<int64_t>()) v.push_back(a);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("reduction_indices must be int32 or int64, got ", DataTypeName(axes.dtype())));
  }
  return ReductionMask(v, rank);
}

template <typename T, typename R, bool kMean>
class ReductionOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(keep_dims_, GetAttrBool(c->def(), "keep_dims"));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    int rank = in.dims();
    ASSIGN_OR_RETURN(std::vector<bool> mask, AxesMask(ctx->input(1), rank));
    std::vector<int64_t> out_dims;
    int64_t count = 1;  // elements reduced into each output element
    for (int d = 0; d < rank; ++d) {
      if (!mask[d]) {
        out_dims.push_back(in.dim_size(d));
      } else {
        count *= in.dim_size(d);
        if (keep_dims_) out_dims.push_back(1);
      }
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));

    if (in.NumElements() == 0) {
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
      T v = R::Init();
      if constexpr (kMean) v = std::numeric_limits<T>::has_quiet_NaN ? std::numeric_limits<T>::quiet_NaN() : T(0);
      auto f = out->flat<T>();
      std::fill(f.begin(), f.end(), v);
      return absl::OkStatus();
    }

    std::vector<Group> groups;
    for (int d = 0; d < rank; ++d) {
      int64_t s = in.dim_size(d);
      if (s == 1) continue;
      if (!groups.empty() && groups.back().reduced == mask[d]) {
        groups.back().size *= s;
      } else {
        groups.push_back({s, mask[d]});
      }
    }
    int remaining = 0;
    for (const Group& g : groups) remaining += g.reduced ? 1 : 0;
    if (remaining == 0) {
      // Nothing to reduce (only size-1 axes, or none): same elements.
      ASSIGN_OR_RETURN(Tensor o, in.Reshaped(out_shape));
      return ctx->set_output(0, std::move(o));
    }

    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    Tensor current = in;
    while (remaining > 0) {
      int j = static_cast<int>(groups.size()) - 1;
      while (!groups[static_cast<size_t>(j)].reduced) --j;
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < j; ++k) outer *= groups[static_cast<size_t>(k)].size;
      for (size_t k = static_cast<size_t>(j) + 1; k < groups.size(); ++k) inner *= groups[k].size;
      int64_t n = groups[static_cast<size_t>(j)].size;
      Tensor next;
      if (remaining == 1) {
        next = *out;
      } else {
        ASSIGN_OR_RETURN(next, Tensor::Allocate(DataTypeToEnum<T>::value, TensorShape({outer * inner})));
      }
      Reduce3<T, R>(ctx, current.flat<T>().data(), outer, n, inner, next.flat<T>().data());
      groups.erase(groups.begin() + j);
      current = next;
      --remaining;
    }

    if constexpr (kMean) {
      auto f = out->flat<T>();
      T divisor = static_cast<T>(count);
      ctx->ParallelFor(static_cast<int64_t>(f.size()), 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) f[i] /= divisor;
      });
    }
    return absl::OkStatus();
  }

 private:
  bool keep_dims_ = false;
};

template <typename T, bool kMax>
class ArgReductionOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const Tensor& dim_t = ctx->input(1);
    if (dim_t.dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension must be a scalar, got shape ", dim_t.shape().DebugString()));
    }
    int64_t axis = dim_t.dtype() == DT_INT32 ? dim_t.scalar<int32_t>() : dim_t.scalar<int64_t>();
    int rank = in.dims();
    if (rank == 0) return absl::InvalidArgumentError("input must have rank at least 1, got a scalar");
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected dimension in the range [", -rank, ", ", rank, "), but got ", axis));
    }
    if (axis < 0) axis += rank;
    int a = static_cast<int>(axis);
    int64_t n = in.dim_size(a);
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reduction axis ", a, " is empty in shape ", in.shape().DebugString()));
    }
    TensorShape out_shape = in.shape();
    out_shape.RemoveDim(a);
    int64_t outer = 1;
    for (int d = 0; d < a; ++d) outer *= in.dim_size(d);
    int64_t inner = out_shape.num_elements() / std::max<int64_t>(outer, 1);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    if (output_type(0) == DT_INT32) {
      if (n > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError("reduced dimension too large for output_type int32");
      }
      Run<int32_t>(ctx, in.flat<T>().data(), outer, n, inner, out->flat<int32_t>().data());
    } else {
      Run<int64_t>(ctx, in.flat<T>().data(), outer, n, inner, out->flat<int64_t>().data());
    }
    return absl::OkStatus();
  }

 private:
  // Strictly better; the first extreme wins ties, as in TF.
  static bool Better(T a, T b) { return kMax ? a > b : a < b; }

  template <typename Out>
  static void Run(OpKernelContext* ctx, const T* in, int64_t outer, int64_t n, int64_t inner, Out* out) {
    ctx->ParallelFor(outer, n * inner, [&](int64_t b, int64_t e) {
      std::vector<T> best(static_cast<size_t>(inner));
      for (int64_t o = b; o < e; ++o) {
        const T* src = in + o * n * inner;
        Out* dst = out + o * inner;
        std::copy_n(src, inner, best.begin());
        std::fill(dst, dst + inner, Out(0));
        for (int64_t r = 1; r < n; ++r) {
          const T* row = src + r * inner;
          for (int64_t i = 0; i < inner; ++i) {
            if (Better(row[i], best[static_cast<size_t>(i)])) {
              best[static_cast<size_t>(i)] = row[i];
              dst[i] = static_cast<Out>(r);
            }
          }
        }
      }
    });
  }
};

template <typename T>
void RegisterForType(KernelRegistry* r) {
  constexpr DataType dt = DataTypeToEnum<T>::value;
  r->Register<ReductionOp<T, SumReducer<T>, false>>("Sum", kCpu, dt);
  r->Register<ReductionOp<T, SumReducer<T>, true>>("Mean", kCpu, dt);
  r->Register<ReductionOp<T, MaxReducer<T>, false>>("Max", kCpu, dt);
  r->Register<ReductionOp<T, MinReducer<T>, false>>("Min", kCpu, dt);
  r->Register<ReductionOp<T, ProdReducer<T>, false>>("Prod", kCpu, dt);
  r->Register<ArgReductionOp<T, true>>("ArgMax", kCpu, dt);
  r->Register<ArgReductionOp<T, false>>("ArgMin", kCpu, dt);
}

}  // namespace

void RegisterReductionKernels(KernelRegistry* r) {
  RegisterForType<float>(r);
  RegisterForType<double>(r);
  RegisterForType<int32_t>(r);
  RegisterForType<int64_t>(r);
}

}  // namespace distflow
