// Kernels for the float unary functions beyond math_kernels.cc's: Log1p,
// Expm1, Reciprocal, Sin, Cos, Floor, Ceil and Round (half to even, as
// TensorFlow rounds), and the bool-valued IsNan, IsInf, IsFinite. Each is one std:: call per element over contiguous
// ranges split across the intra-op pool, so results do not depend on the
// number of threads.
#include <cmath>
#include <type_traits>

#include "base/status_macros.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

struct Log1pF {
  template <typename T>
  T operator()(T x) const {
    return std::log1p(x);
  }
};
struct Expm1F {
  template <typename T>
  T operator()(T x) const {
    return std::expm1(x);
  }
};
struct ReciprocalF {
  template <typename T>
  T operator()(T x) const {
    return T{1} / x;
  }
};
struct SinF {
  template <typename T>
  T operator()(T x) const {
    return std::sin(x);
  }
};
struct CosF {
  template <typename T>
  T operator()(T x) const {
    return std::cos(x);
  }
};
struct FloorF {
  template <typename T>
  T operator()(T x) const {
    return std::floor(x);
  }
};
struct CeilF {
  template <typename T>
  T operator()(T x) const {
    return std::ceil(x);
  }
};
// std::nearbyint rounds to even under the default rounding mode (2.5 -> 2,
// -0.5 -> -0), as TensorFlow's Round does; std::round would round half away.
struct RoundF {
  template <typename T>
  T operator()(T x) const {
    return std::nearbyint(x);
  }
};

struct IsNanF {
  template <typename T>
  bool operator()(T x) const {
    return std::isnan(x);
  }
};
struct IsInfF {
  template <typename T>
  bool operator()(T x) const {
    return std::isinf(x);
  }
};
struct IsFiniteF {
  template <typename T>
  bool operator()(T x) const {
    return std::isfinite(x);
  }
};

// y = f(x) elementwise; Out is T, or bool for the Is* predicates.
template <typename T, typename F, int kCost, typename Out = T>
class FloatUnaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();
    const T* in = x.flat<T>().data();
    Out* o = out->flat<Out>().data();
    ctx->ParallelFor(n, kCost, [&](int64_t begin, int64_t end) {
      const F f;
      for (int64_t i = begin; i < end; ++i) o[i] = f(in[i]);
    });
    return absl::OkStatus();
  }
};

template <typename F, int kCost, bool kBool = false>
void RegisterFloat(KernelRegistry* r, const char* op) {
  r->Register<FloatUnaryOp<float, F, kCost, std::conditional_t<kBool, bool, float>>>(op, kCpu, DT_FLOAT);
  r->Register<FloatUnaryOp<double, F, kCost, std::conditional_t<kBool, bool, double>>>(op, kCpu, DT_DOUBLE);
}

}  // namespace

void RegisterMathUnaryKernels(KernelRegistry* r) {
  RegisterFloat<Log1pF, 20>(r, "Log1p");
  RegisterFloat<Expm1F, 20>(r, "Expm1");
  RegisterFloat<ReciprocalF, 4>(r, "Reciprocal");
  RegisterFloat<SinF, 20>(r, "Sin");
  RegisterFloat<CosF, 20>(r, "Cos");
  RegisterFloat<FloorF, 2>(r, "Floor");
  RegisterFloat<CeilF, 2>(r, "Ceil");
  RegisterFloat<RoundF, 2>(r, "Round");
  RegisterFloat<IsNanF, 1, true>(r, "IsNan");
  RegisterFloat<IsInfF, 1, true>(r, "IsInf");
  RegisterFloat<IsFiniteF, 1, true>(r, "IsFinite");
}

}  // namespace distflow
