// Neural-network kernels other than convolution and pooling (conv_kernels.cc):
// BiasAdd(Grad), activations and their grads, softmax, cross-entropy losses,
// L2Loss and Dropout. Elementwise work uses Eigen array maps over contiguous
// chunks split across the intra-op pool.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/isa_dispatch.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterConvKernels(KernelRegistry* r);  // conv_kernels.cc
void RegisterPoolKernels(KernelRegistry* r);  // pool_kernels.cc

namespace {

template <typename T>
using ArrMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// ---------------------------------------------------------------------------
// Elementwise activations: out = F(in), chunked over the intra-op pool.

enum class Act { kRelu, kRelu6, kElu, kSigmoid, kTanh, kSoftplus };

template <typename T, Act A>
void ApplyAct(ConstArrMap<T> x, ArrMap<T> y) {
  if constexpr (A == Act::kRelu) {
    y = x.max(T(0));
  } else if constexpr (A == Act::kRelu6) {
    y = x.max(T(0)).min(T(6));
  } else if constexpr (A == Act::kElu) {
    y = (x < T(0)).select(x.exp() - T(1), x);
  } else if constexpr (A == Act::kSigmoid) {
    y = (T(1) + (-x).exp()).inverse();
  } else if constexpr (A == Act::kTanh) {
    y = x.tanh();
  } else {
    // softplus(x) = max(x, 0) + log1p(exp(-|x|)), stable for any x.
    y = x.max(T(0)) + (-x.abs()).exp().log1p();
  }
}

// Relu and its gradient, the activations of the CNNs: plain loops, run for
// the widest instruction set this CPU has (isa_dispatch.h).
template <typename T>
DISTFLOW_ISA_INLINE void ReluLoop(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];  // NaN stays NaN, as with Eigen's max
}
// TF's formula, gradients * (features > 0), including its NaN behaviour.
template <typename T>
DISTFLOW_ISA_INLINE void ReluGradLoop(const T* __restrict g, const T* __restrict f, T* __restrict z, int64_t n) {
  // (The mask through named constants: GCC 12 vectorises this form for AVX2
  // too, g * T(f > 0) only with AVX-512's mask registers.)
  const T one(1), zero(0);
  for (int64_t i = 0; i < n; ++i) {
    const T mask = f[i] > zero ? one : zero;
    z[i] = g[i] * mask;
  }
}

template <typename T, Act A>
class ActOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in.shape()));
    const T* x = in.flat<T>().data();
    T* y = out->template flat<T>().data();
    const int64_t cost = (A == Act::kRelu || A == Act::kRelu6) ? 1 : 20;
    ctx->ParallelFor(in.NumElements(), cost, [&](int64_t b, int64_t e) {
      if constexpr (A == Act::kRelu) {
        DispatchIsa<ReluLoop<T>>(x + b, y + b, e - b);
      } else {
        ApplyAct<T, A>(ConstArrMap<T>(x + b, e - b), ArrMap<T>(y + b, e - b));
      }
    });
    return absl::OkStatus();
  }
};

// Gradients: out = G(a, b) with TF's input order.
template <typename T, Act A>
void ApplyGrad(ConstArrMap<T> a, ConstArrMap<T> b, ArrMap<T> z) {
  // Eigen 3.4's select() does not vectorize; multiplying by the mask as 0/1 does.
  if constexpr (A == Act::kRelu) {  // (gradients, features)
    z = a * (b > T(0)).template cast<T>();
  } else if constexpr (A == Act::kRelu6) {  // (gradients, features)
    z = a * ((b > T(0)) && (b < T(6))).template cast<T>();
  } else if constexpr (A == Act::kElu) {  // (gradients, outputs)
    z = (b < T(0)).select(a * (b + T(1)), a);
  } else if constexpr (A == Act::kSigmoid) {  // (y, dy)
    z = b * a * (T(1) - a);
  } else if constexpr (A == Act::kTanh) {  // (y, dy)
    z = b * (T(1) - a * a);
  } else {  // (gradients, features): g * sigmoid(f)
    z = a / (T(1) + (-b).exp());
  }
}

template <typename T, Act A>
class ActGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (a.shape() != b.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(type_string(), " inputs must have the same shape: ",
                                                     a.shape().DebugString(), " vs ", b.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, a.shape()));
    const T* ap = a.flat<T>().data();
    const T* bp = b.flat<T>().data();
    T* z = out->template flat<T>().data();
    ctx->ParallelFor(a.NumElements(), A == Act::kSoftplus ? 20 : 2, [&](int64_t s, int64_t e) {
      if constexpr (A == Act::kRelu) {
        DispatchIsa<ReluGradLoop<T>>(ap + s, bp + s, z + s, e - s);
      } else {
        ApplyGrad<T, A>(ConstArrMap<T>(ap + s, e - s), ConstArrMap<T>(bp + s, e - s), ArrMap<T>(z + s, e - s));
      }
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// BiasAdd / BiasAddGrad (NHWC: the bias runs along the last dimension).

absl::Status CheckNhwc(const proto::NodeDef& def) {
  if (!HasAttr(def, "data_format")) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string fmt, GetAttrString(def, "data_format"));
  if (fmt != "NHWC") {
    return absl::InvalidArgumentError(
        absl::StrCat("data_format '", fmt, "' is not supported: only NHWC is implemented"));
  }
  return absl::OkStatus();
}

// Rows [r0, r1) of a [rows, c] matrix plus a bias of length c.
template <typename T>
DISTFLOW_ISA_INLINE void BiasAddRows(const T* __restrict x, const T* __restrict b, T* __restrict y, int64_t c,
                                     int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
    T* yr = y + r * c;
    for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] + b[j];
  }
}

// p[j] += x[r, j] for the rows [r0, r1).
template <typename T>
DISTFLOW_ISA_INLINE void SumRows(const T* __restrict x, T* __restrict p, int64_t c, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * c;
    for (int64_t j = 0; j < c; ++j) p[j] += xr[j];
  }
}

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return CheckNhwc(c->def()); }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& v = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    if (v.dims() < 2 || bias.dims() != 1 || v.dim_size(v.dims() - 1) != bias.dim_size(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("BiasAdd needs value of rank >= 2 whose last dimension equals the "
                       "bias length: value ",
                       v.shape().DebugString(), ", bias ", bias.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, v.shape()));
    const int64_t c = bias.dim_size(0);
    if (c == 0 || v.NumElements() == 0) return absl::OkStatus();
    const int64_t rows = v.NumElements() / c;
    const T* x = v.flat<T>().data();
    const T* b = bias.flat<T>().data();
    T* y = out->template flat<T>().data();
    ctx->ParallelFor(rows, c, [&](int64_t r0, int64_t r1) { DispatchIsa<BiasAddRows<T>>(x, b, y, c, r0, r1); });
    return absl::OkStatus();
  }
};

template <typename T>
class BiasAddGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override { return CheckNhwc(c->def()); }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& g = ctx->input(0);
    if (g.dims() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("BiasAddGrad needs out_backprop of rank >= 2, got ", g.shape().DebugString()));
    }
    const int64_t c = g.dim_size(g.dims() - 1);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({c})));
    T* y = out->template flat<T>().data();
    std::fill(y, y + c, T(0));
    if (c == 0 || g.NumElements() == 0) return absl::OkStatus();
    const int64_t rows = g.NumElements() / c;
    const T* x = g.flat<T>().data();
    // Partial sums over fixed row blocks, then a reduction of the blocks.
    const int64_t blocks = std::min<int64_t>(rows, 16);
    std::vector<T> partial(static_cast<size_t>(blocks * c), T(0));
    ctx->ParallelFor(blocks, (rows / blocks + 1) * c, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        T* p = partial.data() + blk * c;
        const int64_t r0 = rows * blk / blocks, r1 = rows * (blk + 1) / blocks;
        DispatchIsa<SumRows<T>>(x, p, c, r0, r1);
      }
    });
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const T* p = partial.data() + blk * c;
      for (int64_t j = 0; j < c; ++j) y[j] += p[j];
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Softmax and LogSoftmax over the last dimension.

template <typename T, bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    if (in.dims() < 1) {
      return absl::InvalidArgumentError(absl::StrCat("logits must have rank >= 1, got ", in.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in.shape()));
    const int64_t c = in.dim_size(in.dims() - 1);
    if (c == 0 || in.NumElements() == 0) return absl::OkStatus();
    const int64_t rows = in.NumElements() / c;
    const T* x = in.flat<T>().data();
    T* y = out->template flat<T>().data();
    ctx->ParallelFor(rows, 20 * c, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ConstArrMap<T> xr(x + r * c, c);
        ArrMap<T> yr(y + r * c, c);
        const T m = xr.maxCoeff();
        yr = (xr - m).exp();
        const T s = yr.sum();
        if constexpr (kLog) {
          yr = (xr - m) - std::log(s);
        } else {
          yr = yr / s;
        }
      }
    });
    return absl::OkStatus();
  }
};

// loss[r] = sum_j labels[r,j] * (lse_r - (x[r,j] - max_r)); backprop = softmax - labels.
template <typename T>
class XentOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& f = ctx->input(0);
    const Tensor& l = ctx->input(1);
    if (f.dims() != 2 || f.shape() != l.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("logits and labels must be same-shaped matrices: logits ",
                                                     f.shape().DebugString(), ", labels ", l.shape().DebugString()));
    }
    const int64_t b = f.dim_size(0), c = f.dim_size(1);
    ASSIGN_OR_RETURN(Tensor * loss, ctx->allocate_output(0, TensorShape({b})));
    ASSIGN_OR_RETURN(Tensor * back, ctx->allocate_output(1, f.shape()));
    const T* x = f.flat<T>().data();
    const T* lab = l.flat<T>().data();
    T* lo = loss->template flat<T>().data();
    T* bp = back->template flat<T>().data();
    if (c == 0) {
      std::fill(lo, lo + b, T(0));
      return absl::OkStatus();
    }
    ctx->ParallelFor(b, 25 * c, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ConstArrMap<T> xr(x + r * c, c);
        ConstArrMap<T> lr(lab + r * c, c);
        ArrMap<T> br(bp + r * c, c);
        const T m = xr.maxCoeff();
        br = (xr - m).exp();
        const T s = br.sum();
        const T lse = std::log(s);
        lo[r] = (lr * (lse - (xr - m))).sum();
        br = br / s - lr;
      }
    });
    return absl::OkStatus();
  }
};

template <typename T>
class SparseXentOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& f = ctx->input(0);
    const Tensor& l = ctx->input(1);
    if (f.dims() != 2 || l.dims() != 1 || l.dim_size(0) != f.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat("logits must be [batch, classes] and labels [batch]: logits ",
                                                     f.shape().DebugString(), ", labels ", l.shape().DebugString()));
    }
    const int64_t b = f.dim_size(0), c = f.dim_size(1);
    std::vector<int64_t> lab(static_cast<size_t>(b));
    if (l.dtype() == DT_INT32) {
      for (int64_t r = 0; r < b; ++r) lab[static_cast<size_t>(r)] = l.flat<int32_t>()[static_cast<size_t>(r)];
    } else if (l.dtype() == DT_INT64) {
      for (int64_t r = 0; r < b; ++r) lab[static_cast<size_t>(r)] = l.flat<int64_t>()[static_cast<size_t>(r)];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("labels must be int32 or int64, got ", DataTypeName(l.dtype())));
    }
    for (int64_t r = 0; r < b; ++r) {
      if (lab[static_cast<size_t>(r)] < 0 || lab[static_cast<size_t>(r)] >= c) {
        return absl::InvalidArgumentError(absl::StrCat("Received a label value of ", lab[static_cast<size_t>(r)],
                                                       " (at index ", r, ") which is outside the valid range of [0, ",
                                                       c, ")"));
      }
    }
    ASSIGN_OR_RETURN(Tensor * loss, ctx->allocate_output(0, TensorShape({b})));
    ASSIGN_OR_RETURN(Tensor * back, ctx->allocate_output(1, f.shape()));
    const T* x = f.flat<T>().data();
    T* lo = loss->template flat<T>().data();
    T* bp = back->template flat<T>().data();
    ctx->ParallelFor(b, 25 * c, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ConstArrMap<T> xr(x + r * c, c);
        ArrMap<T> br(bp + r * c, c);
        const T m = xr.maxCoeff();
        br = (xr - m).exp();
        const T s = br.sum();
        const int64_t k = lab[static_cast<size_t>(r)];
        lo[r] = std::log(s) - (xr[k] - m);
        br = br / s;
        br[k] -= T(1);
      }
    });
    return absl::OkStatus();
  }
};

template <typename T>
class L2LossOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape()));
    const int64_t n = in.NumElements();
    const T* x = in.flat<T>().data();
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(16, n / 4096));
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
    ctx->ParallelFor(blocks, n / blocks * 2 + 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t s = n * blk / blocks, e = n * (blk + 1) / blocks;
        partial[static_cast<size_t>(blk)] = static_cast<double>(ConstArrMap<T>(x + s, e - s).square().sum());
      }
    });
    double total = 0;
    for (double p : partial) total += p;
    out->template scalar<T>() = static_cast<T>(total / 2);
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Dropout(x, keep_prob) -> (x * mask, mask), mask = (u < keep_prob) / keep_prob.

template <typename T>
class DropoutMaskedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& mask = ctx->input(2);
    if (mask.shape() != x.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("DropoutMasked: the mask has shape ", mask.shape().DebugString(),
                                                     " but x has ", x.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const T* xp = x.flat<T>().data();
    const T* mp = mask.flat<T>().data();
    T* op = out->template flat<T>().data();
    for (int64_t i = 0; i < x.NumElements(); ++i) op[i] = xp[i] * mp[i];
    return ctx->set_output(1, mask);
  }
};

template <typename T>
class DropoutOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(int64_t seed, GetAttrInt(c->def(), "seed"));
    ASSIGN_OR_RETURN(int64_t seed2, GetAttrInt(c->def(), "seed2"));
    absl::MutexLock l(&mu_);
    kernel_util::SeedGenerator(&gen_, seed, seed2);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& kp = ctx->input(1);
    if (kp.NumElements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("keep_prob must be a scalar, got shape ", kp.shape().DebugString()));
    }
    const T keep = kp.flat<T>()[0];
    if (!(keep > T(0) && keep <= T(1))) {
      return absl::InvalidArgumentError(absl::StrCat("keep_prob must be in (0, 1], got ", keep));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    ASSIGN_OR_RETURN(Tensor * mask, ctx->allocate_output(1, x.shape()));
    const int64_t n = x.NumElements();
    const T* xp = x.flat<T>().data();
    T* op = out->template flat<T>().data();
    T* mp = mask->template flat<T>().data();
    const T scale = T(1) / keep;
    {
      absl::MutexLock l(&mu_);
      for (int64_t i = 0; i < n; ++i) mp[i] = kernel_util::UniformFrom<T>(gen_()) < keep ? scale : T(0);
    }
    for (int64_t i = 0; i < n; ++i) op[i] = xp[i] * mp[i];
    return absl::OkStatus();
  }

 private:
  mutable absl::Mutex mu_;
  mutable std::mt19937_64 gen_ ABSL_GUARDED_BY(mu_);
};

template <template <typename> class K>
void RegisterFloat(KernelRegistry* r, const char* op) {
  r->Register<K<float>>(op, kCpu, DT_FLOAT);
  r->Register<K<double>>(op, kCpu, DT_DOUBLE);
}

template <Act A>
void RegisterAct(KernelRegistry* r, const char* op, const char* grad) {
  r->Register<ActOp<float, A>>(op, kCpu, DT_FLOAT);
  r->Register<ActOp<double, A>>(op, kCpu, DT_DOUBLE);
  r->Register<ActGradOp<float, A>>(grad, kCpu, DT_FLOAT);
  r->Register<ActGradOp<double, A>>(grad, kCpu, DT_DOUBLE);
}

template <typename T>
using Softmax = SoftmaxOp<T, false>;
template <typename T>
using LogSoftmax = SoftmaxOp<T, true>;

}  // namespace

void RegisterNnKernels(KernelRegistry* r) {
  RegisterAct<Act::kRelu>(r, "Relu", "ReluGrad");
  RegisterAct<Act::kRelu6>(r, "Relu6", "Relu6Grad");
  RegisterAct<Act::kElu>(r, "Elu", "EluGrad");
  RegisterAct<Act::kSigmoid>(r, "Sigmoid", "SigmoidGrad");
  RegisterAct<Act::kTanh>(r, "Tanh", "TanhGrad");
  RegisterAct<Act::kSoftplus>(r, "Softplus", "SoftplusGrad");
  RegisterFloat<BiasAddOp>(r, "BiasAdd");
  RegisterFloat<BiasAddGradOp>(r, "BiasAddGrad");
  RegisterFloat<Softmax>(r, "Softmax");
  RegisterFloat<LogSoftmax>(r, "LogSoftmax");
  RegisterFloat<XentOp>(r, "SoftmaxCrossEntropyWithLogits");
  RegisterFloat<L2LossOp>(r, "L2Loss");
  RegisterFloat<DropoutOp>(r, "Dropout");
  RegisterFloat<DropoutMaskedOp>(r, "DropoutMasked");
  RegisterFloat<SparseXentOp>(r, "SparseSoftmaxCrossEntropyWithLogits");
  RegisterConvKernels(r);
  RegisterPoolKernels(r);
}

}  // namespace distflow
