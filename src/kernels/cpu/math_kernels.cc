// Kernels for the elementwise math ops: broadcasting binary arithmetic and
// comparisons, logic, unary functions and AddN (Cast and Select:
// cast_select_kernels.cc).
//
// Elementwise loops run over raw pointers in contiguous runs (see
// broadcast.h) so the compiler vectorises them; transcendental unary
// functions use Eigen's vectorised implementations. Large inputs are split
// over the intra-op pool with ParallelFor.
//
// Integer arithmetic wraps around (two's complement) instead of overflowing;
// integer Div and Pow reject a zero divisor and negative exponents.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/kernel_registry.h"
// GCC 12 reports false "may be used uninitialized" warnings inside its own
// AVX-512 intrinsics (the _mm512_undefined_* idiom) when Eigen's packet math
// is built with -march=native.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "tensor/tensor_eigen.h"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace distflow {
namespace {

// ---------------------------------------------------------------------------
// Wrapping integer arithmetic (signed overflow is undefined in C++).

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename T>
T WrapSub(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (kIsInt<T>) {
    // uint8 promotes to int, which cannot overflow for 8-bit operands.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
template <typename T>
T WrapNeg(T a) {
  if constexpr (kIsInt<T>) {
    return WrapSub<T>(T{0}, a);
  } else {
    return -a;
  }
}

// ---------------------------------------------------------------------------
// Binary functors. Validate<T>(y) may reject the right-hand operand before
// anything is computed (integer division by zero, negative integer powers).

struct NoValidate {
  template <typename T>
  static absl::Status Validate(const Tensor&) {
    return absl::OkStatus();
  }
};

struct AddF : NoValidate {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapAdd(a, b);
  }
};
struct SubF : NoValidate {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapSub(a, b);
  }
};
struct MulF : NoValidate {
  template <typename T>
  T operator()(T a, T b) const {
    return WrapMul(a, b);
  }
};
struct DivF {
  template <typename T>
  static absl::Status Validate(const Tensor& y) {
    if constexpr (kIsInt<T>) {
      for (T v : y.flat<T>()) {
        if (v == 0) return absl::InvalidArgumentError("Integer division by zero");
      }
    }
    return absl::OkStatus();
  }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && kIsInt<T>) {
      if (b == -1) return WrapNeg(a);  // INT_MIN / -1 would trap
    }
    return static_cast<T>(a / b);
  }
};
struct PowF {
  template <typename T>
  static absl::Status Validate(const Tensor& y) {
    if constexpr (kIsInt<T> && std::is_signed_v<T>) {
      for (T v : y.flat<T>()) {
        if (v < 0) return absl::InvalidArgumentError("Integers to negative integer powers are not allowed");
      }
    }
    return absl::OkStatus();
  }
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) {
      T result = 1, base = a;
      while (b > 0) {
        if (b & 1) result = WrapMul(result, base);
        b = static_cast<T>(b >> 1);
        if (b > 0) base = WrapMul(base, base);
      }
      return result;
    } else {
      return std::pow(a, b);
    }
  }
};
// NaN propagates, as in TensorFlow.
struct MaximumF : NoValidate {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return a < b ? b : a;
  }
};
struct MinimumF : NoValidate {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};

struct EqualF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqualF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct LessF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqualF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqualF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct LogicalAndF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a && b;
  }
};
struct LogicalOrF : NoValidate {
  template <typename T>
  bool operator()(T a, T b) const {
    return a || b;
  }
};

// One contiguous run: o[i] = f(a[sa ? i : 0], b[sb ? i : 0]). The four cases
// are separate loops so that each vectorises.
template <typename T, typename Out, typename F>
void ApplyRun(Out* o, const T* a, const T* b, int64_t n, bool sa, bool sb) {
  const F f;
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (sb) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    std::fill(o, o + n, f(*a, *b));
  }
}

template <typename T, typename F, int kCost>
class BinaryOp : public OpKernel {
 public:
  using Out = decltype(std::declval<const F&>()(T{}, T{}));
  using OpKernel::OpKernel;

  // One pass over the broadcast output, which may be far larger than the
  // inputs ([n,1] + [1,n]).
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (in.size() != 2) return OpKernel::EstimatedWork(in);
    absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make(in[0], in[1]);
    return plan.ok() ? plan->output_shape.num_elements() : OpKernel::EstimatedWork(in);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    ASSIGN_OR_RETURN(BroadcastPlan plan, BroadcastPlan::Make(x.shape(), y.shape()));
    RETURN_IF_ERROR(F::template Validate<T>(y));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, plan.output_shape));
    const int64_t n = out->NumElements();
    if (n == 0) return absl::OkStatus();
    const T* a = x.flat<T>().data();
    const T* b = y.flat<T>().data();
    Out* o = out->flat<Out>().data();
    ctx->ParallelFor(n, kCost, [&](int64_t begin, int64_t end) {
      if (plan.same_shape) {
        ApplyRun<T, Out, F>(o + begin, a + begin, b + begin, end - begin, true, true);
        return;
      }
      ForEachBroadcastRun(plan, begin, end, [&](int64_t oo, int64_t ia, int64_t ib, int64_t len, bool sa, bool sb) {
        ApplyRun<T, Out, F>(o + oo, a + ia, b + ib, len, sa, sb);
      });
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Unary functors: Run(in, out, n) over a contiguous range.

struct NegF {
  template <typename T>
  static void Run(const T* in, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = WrapNeg(in[i]);
  }
};
struct SquareF {
  template <typename T>
  static void Run(const T* in, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = WrapMul(in[i], in[i]);
  }
};
struct AbsF {
  template <typename T>
  static void Run(const T* in, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kIsInt<T>) {
        out[i] = in[i] < 0 ? WrapNeg(in[i]) : in[i];
      } else {
        out[i] = std::fabs(in[i]);
      }
    }
  }
};
// -1, 0 or 1; sign(0) keeps the zero and sign(NaN) is NaN.
struct SignF {
  template <typename T>
  static void Run(const T* in, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const T v = in[i];
      out[i] = v > T{0} ? T{1} : (v < T{0} ? T{-1} : v);
    }
  }
};
struct LogicalNotF {
  template <typename T>
  static void Run(const T* in, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = !in[i];
  }
};

#define DF_EIGEN_UNARY(NAME, EXPR)                                             \
  struct NAME {                                                                \
    template <typename T>                                                      \
    static void Run(const T* in, T* out, int64_t n) {                          \
      EigenTensorMap<T, 1>(out, n) = EigenTensorMap<const T, 1>(in, n).EXPR(); \
    }                                                                          \
  };
DF_EIGEN_UNARY(SqrtF, sqrt)
DF_EIGEN_UNARY(RsqrtF, rsqrt)
DF_EIGEN_UNARY(ExpF, exp)
DF_EIGEN_UNARY(LogF, log)
#undef DF_EIGEN_UNARY

template <typename T, typename F, int kCost>
class UnaryOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();
    const T* in = x.flat<T>().data();
    T* o = out->flat<T>().data();
    // Work is split at multiples of kBlock elements so that the vectorised
    // and scalar parts of Eigen's evaluation (which may round differently)
    // fall on the same elements whatever the number of threads.
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    ctx->ParallelFor(blocks, kCost * kBlock, [&](int64_t b0, int64_t b1) {
      const int64_t begin = b0 * kBlock, end = std::min(n, b1 * kBlock);
      F::Run(in + begin, o + begin, end - begin);
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// AddN: the sum of N same-shaped tensors.

template <typename T>
class AddNOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const int num = ctx->num_inputs();
    if (num < 1) return absl::InvalidArgumentError("AddN needs at least one input");
    const Tensor& first = ctx->input(0);
    for (int k = 1; k < num; ++k) {
      if (ctx->input(k).shape() != first.shape()) {
        return absl::InvalidArgumentError(absl::StrCat("AddN: input ", k, " has shape ",
                                                       ctx->input(k).shape().DebugString(), " but input 0 has shape ",
                                                       first.shape().DebugString()));
      }
    }
    if (num == 1) return ctx->set_output(0, first);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, first.shape()));
    const int64_t n = first.NumElements();
    if (n == 0) return absl::OkStatus();
    std::vector<const T*> ins(static_cast<size_t>(num));
    for (int k = 0; k < num; ++k) ins[static_cast<size_t>(k)] = ctx->input(k).flat<T>().data();
    T* o = out->flat<T>().data();
    ctx->ParallelFor(n, num, [&](int64_t begin, int64_t end) {
      const T* a = ins[0];
      const T* b = ins[1];
      for (int64_t i = begin; i < end; ++i) o[i] = WrapAdd(a[i], b[i]);
      for (size_t k = 2; k < ins.size(); ++k) {
        const T* c = ins[k];
        for (int64_t i = begin; i < end; ++i) o[i] = WrapAdd(o[i], c[i]);
      }
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Registration.

template <template <typename> class K, typename... Ts>
void RegisterFor(KernelRegistry* r, const char* op) {
  (r->Register<K<Ts>>(op, kCpu, DataTypeToEnum<Ts>::value), ...);
}

#define DF_BINARY(NAME, F, COST) \
  template <typename T>          \
  using NAME = BinaryOp<T, F, COST>;
DF_BINARY(AddOp, AddF, 1)
DF_BINARY(SubOp, SubF, 1)
DF_BINARY(MulOp, MulF, 1)
DF_BINARY(DivOp, DivF, 8)
DF_BINARY(PowOp, PowF, 40)
DF_BINARY(MaximumOp, MaximumF, 1)
DF_BINARY(MinimumOp, MinimumF, 1)
DF_BINARY(EqualOp, EqualF, 1)
DF_BINARY(NotEqualOp, NotEqualF, 1)
DF_BINARY(LessOp, LessF, 1)
DF_BINARY(LessEqualOp, LessEqualF, 1)
DF_BINARY(GreaterOp, GreaterF, 1)
DF_BINARY(GreaterEqualOp, GreaterEqualF, 1)
DF_BINARY(LogicalAndOp, LogicalAndF, 1)
DF_BINARY(LogicalOrOp, LogicalOrF, 1)
#undef DF_BINARY

#define DF_UNARY(NAME, F, COST) \
  template <typename T>         \
  using NAME = UnaryOp<T, F, COST>;
DF_UNARY(NegOp, NegF, 1)
DF_UNARY(SquareOp, SquareF, 1)
DF_UNARY(AbsOp, AbsF, 1)
DF_UNARY(SignOp, SignF, 2)
DF_UNARY(SqrtOp, SqrtF, 8)
DF_UNARY(RsqrtOp, RsqrtF, 10)
DF_UNARY(ExpOp, ExpF, 20)
DF_UNARY(LogOp, LogF, 20)
DF_UNARY(LogicalNotOp, LogicalNotF, 1)
#undef DF_UNARY

}  // namespace

void RegisterMathKernels(KernelRegistry* r) {
  RegisterFor<AddOp, float, double, int32_t, int64_t, uint8_t>(r, "Add");
  RegisterFor<SubOp, float, double, int32_t, int64_t, uint8_t>(r, "Sub");
  RegisterFor<MulOp, float, double, int32_t, int64_t, uint8_t>(r, "Mul");
  RegisterFor<MaximumOp, float, double, int32_t, int64_t, uint8_t>(r, "Maximum");
  RegisterFor<MinimumOp, float, double, int32_t, int64_t, uint8_t>(r, "Minimum");
  RegisterFor<DivOp, float, double, int32_t, int64_t>(r, "Div");
  RegisterFor<PowOp, float, double, int32_t, int64_t>(r, "Pow");

  RegisterFor<LessOp, float, double, int32_t, int64_t, uint8_t>(r, "Less");
  RegisterFor<LessEqualOp, float, double, int32_t, int64_t, uint8_t>(r, "LessEqual");
  RegisterFor<GreaterOp, float, double, int32_t, int64_t, uint8_t>(r, "Greater");
  RegisterFor<GreaterEqualOp, float, double, int32_t, int64_t, uint8_t>(r, "GreaterEqual");
  RegisterFor<EqualOp, float, double, int32_t, int64_t, uint8_t, bool>(r, "Equal");
  RegisterFor<NotEqualOp, float, double, int32_t, int64_t, uint8_t, bool>(r, "NotEqual");

  // The logic ops have no type attribute: one kernel for any dtype key.
  r->Register<LogicalAndOp<bool>>("LogicalAnd", kCpu, DT_INVALID);
  r->Register<LogicalOrOp<bool>>("LogicalOr", kCpu, DT_INVALID);
  r->Register<LogicalNotOp<bool>>("LogicalNot", kCpu, DT_INVALID);

  RegisterFor<NegOp, float, double, int32_t, int64_t>(r, "Neg");
  RegisterFor<SquareOp, float, double, int32_t, int64_t>(r, "Square");
  RegisterFor<AbsOp, float, double, int32_t, int64_t>(r, "Abs");
  RegisterFor<SignOp, float, double, int32_t, int64_t>(r, "Sign");
  RegisterFor<SqrtOp, float, double>(r, "Sqrt");
  RegisterFor<RsqrtOp, float, double>(r, "Rsqrt");
  RegisterFor<ExpOp, float, double>(r, "Exp");
  RegisterFor<LogOp, float, double>(r, "Log");

  RegisterFor<AddNOp, float, double, int32_t, int64_t, uint8_t>(r, "AddN");
}

}  // namespace distflow
