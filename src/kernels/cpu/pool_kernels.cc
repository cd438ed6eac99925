// MaxPool, AvgPool and their gradients (NHWC, float and double); registered
// from RegisterNnKernels. Direct loops with the channel dimension innermost,
// which vectorise and are memory-bound.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/window.h"
#include "kernels/cpu/isa_dispatch.h"
#include "kernels/cpu/window_geometry.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

using window_geometry::Geom;
using window_geometry::MakeGeom;
using window_geometry::SizesInput;

// ---------------------------------------------------------------------------
// Pooling: direct loops, channels innermost.

// Output rows [b, e) (one row: one image, one output height).
template <typename T>
DISTFLOW_ISA_INLINE void MaxPoolForwardRows(const Geom* gp, const T* x, T* y, int64_t b, int64_t e) {
  const Geom& g = *gp;
  for (int64_t row = b; row < e; ++row) {
    const int64_t n = row / g.oh, oh = row % g.oh;
    const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0), h1 = std::min(oh * g.sh - g.pt + g.kh, g.h);
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0), w1 = std::min(ow * g.sw - g.pl + g.kw, g.w);
      T* out = y + ((n * g.oh + oh) * g.ow + ow) * g.c;
      std::fill(out, out + g.c, std::numeric_limits<T>::lowest());
      for (int64_t ih = h0; ih < h1; ++ih) {
        for (int64_t iw = w0; iw < w1; ++iw) {
          const T* in = x + ((n * g.h + ih) * g.w + iw) * g.c;
          for (int64_t c = 0; c < g.c; ++c) out[c] = in[c] > out[c] ? in[c] : out[c];
        }
      }
    }
  }
}

template <typename T>
void MaxPoolForward(OpKernelContext* ctx, const Geom& g, const T* x, T* y) {
  ctx->ParallelFor(g.n * g.oh, g.ow * g.kh * g.kw * g.c + 1,
                   [&](int64_t b, int64_t e) { DispatchIsa<MaxPoolForwardRows<T>>(&g, x, y, b, e); });
}

// The gradient goes to the first maximum of each window in scan order.
template <typename T>
void MaxPoolBackward(OpKernelContext* ctx, const Geom& g, const T* x, const T* dy, T* dx) {
  // Sizes in locals (stores through the arrays below would otherwise force
  // reloads from `g`), and a branch-free arg-max over the window positions
  // so the channel loop vectorizes. The first maximum wins, as in TF.
  const int64_t C = g.c, H = g.h, W = g.w, OH = g.oh, OW = g.ow;
  ctx->ParallelFor(g.n, OH * OW * g.kh * g.kw * C * 2 + 1, [&](int64_t b, int64_t e) {
    std::vector<T> best(static_cast<size_t>(C));
    std::vector<int32_t> arg(static_cast<size_t>(C));
    std::vector<int64_t> bases;
    bases.reserve(static_cast<size_t>(g.kh * g.kw));
    T* bp = best.data();
    int32_t* ap = arg.data();
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * H * W * C, dx + (n + 1) * H * W * C, T(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0), h1 = std::min(oh * g.sh - g.pt + g.kh, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0), w1 = std::min(ow * g.sw - g.pl + g.kw, W);
          if (h0 >= h1 || w0 >= w1) continue;
          bases.clear();
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) bases.push_back(((n * H + ih) * W + iw) * C);
          const T* first = x + bases[0];
          for (int64_t c = 0; c < C; ++c) {
            bp[c] = first[c];
            ap[c] = 0;
          }
          const int32_t positions = static_cast<int32_t>(bases.size());
          for (int32_t k = 1; k < positions; ++k) {
            const T* in = x + bases[static_cast<size_t>(k)];
            for (int64_t c = 0; c < C; ++c) {
              const T v = in[c];
              const bool greater = v > bp[c];
              bp[c] = greater ? v : bp[c];
              ap[c] = greater ? k : ap[c];
            }
          }
          const T* gy = dy + ((n * OH + oh) * OW + ow) * C;
          for (int64_t c = 0; c < C; ++c) dx[bases[static_cast<size_t>(ap[c])] + c] += gy[c];
        }
      }
    }
  });
}

// Images [b, e); `taken` holds C scratch values.
template <typename T>
DISTFLOW_ISA_INLINE void MaxPoolGradFromOutputImages(const Geom* gp, const T* __restrict x, const T* __restrict y,
                                                     const T* __restrict dy, T* __restrict dx, T* __restrict taken,
                                                     int64_t b, int64_t e) {
  const Geom& g = *gp;
  const int64_t C = g.c, H = g.h, W = g.w, OH = g.oh, OW = g.ow;
  for (int64_t n = b; n < e; ++n) {
    std::fill(dx + n * H * W * C, dx + (n + 1) * H * W * C, T(0));
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0), h1 = std::min(oh * g.sh - g.pt + g.kh, H);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0), w1 = std::min(ow * g.sw - g.pl + g.kw, W);
        const int64_t out = ((n * OH + oh) * OW + ow) * C;
        const T* __restrict ym = y + out;
        const T* __restrict gy = dy + out;
        for (int64_t c = 0; c < C; ++c) taken[c] = T(0);
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            const int64_t base = ((n * H + ih) * W + iw) * C;
            const T* __restrict in = x + base;
            T* __restrict d = dx + base;
            for (int64_t c = 0; c < C; ++c) {
              const T t = taken[c];
              const bool hit = (in[c] == ym[c]) & (t == T(0));
              d[c] += hit ? gy[c] : T(0);
              taken[c] = hit ? T(1) : t;
            }
          }
        }
      }
    }
  }
}

// The same gradient from the forward output `y`: within each window the first
// element equal to the window's maximum gets the gradient. Every loop runs
// over channels with same-width, branch-free operations, so it vectorizes.
template <typename T>
void MaxPoolBackwardFromOutput(OpKernelContext* ctx, const Geom& g, const T* x, const T* y, const T* dy, T* dx) {
  ctx->ParallelFor(g.n, g.oh * g.ow * g.kh * g.kw * g.c * 2 + 1, [&](int64_t b, int64_t e) {
    std::vector<T> taken(static_cast<size_t>(g.c));
    DispatchIsa<MaxPoolGradFromOutputImages<T>>(&g, x, y, dy, dx, taken.data(), b, e);
  });
}

template <typename T>
void AvgPoolForward(OpKernelContext* ctx, const Geom& g, const T* x, T* y) {
  ctx->ParallelFor(g.n * g.oh, g.ow * g.kh * g.kw * g.c + 1, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / g.oh, oh = row % g.oh;
      const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0), h1 = std::min(oh * g.sh - g.pt + g.kh, g.h);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0), w1 = std::min(ow * g.sw - g.pl + g.kw, g.w);
        T* out = y + ((n * g.oh + oh) * g.ow + ow) * g.c;
        std::fill(out, out + g.c, T(0));
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T* in = x + ((n * g.h + ih) * g.w + iw) * g.c;
            for (int64_t c = 0; c < g.c; ++c) out[c] += in[c];
          }
        }
        const int64_t count = std::max<int64_t>((h1 - h0) * (w1 - w0), 1);
        const T inv = T(1) / static_cast<T>(count);
        for (int64_t c = 0; c < g.c; ++c) out[c] *= inv;
      }
    }
  });
}

template <typename T>
void AvgPoolBackward(OpKernelContext* ctx, const Geom& g, const T* dy, T* dx) {
  ctx->ParallelFor(g.n, g.oh * g.ow * g.kh * g.kw * g.c + 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * g.h * g.w * g.c, dx + (n + 1) * g.h * g.w * g.c, T(0));
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0), h1 = std::min(oh * g.sh - g.pt + g.kh, g.h);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0), w1 = std::min(ow * g.sw - g.pl + g.kw, g.w);
          const int64_t count = std::max<int64_t>((h1 - h0) * (w1 - w0), 1);
          const T inv = T(1) / static_cast<T>(count);
          const T* gy = dy + ((n * g.oh + oh) * g.ow + ow) * g.c;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              T* gx = dx + ((n * g.h + ih) * g.w + iw) * g.c;
              for (int64_t c = 0; c < g.c; ++c) gx[c] += gy[c] * inv;
            }
          }
        }
      }
    }
  });
}

enum class PoolKind { kMax, kAvg, kMaxGrad, kAvgGrad };

template <typename T, PoolKind K>
class PoolOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  // A window per input element; AvgPoolGrad's input size is an input's value.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (K == PoolKind::kAvgGrad || in.empty()) return -1;
    return in[0].num_elements() * attrs_.kh * attrs_.kw;
  }

  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(WindowAttrs a, ReadWindowAttrs(c->def(), true));
    attrs_ = a;
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    TensorShape in_shape;
    if constexpr (K == PoolKind::kAvgGrad) {
      ASSIGN_OR_RETURN(TensorShape s, SizesInput(ctx->input(0), "orig_input_shape"));
      in_shape = s;
    } else {
      in_shape = ctx->input(0).shape();
    }
    if (in_shape.dims() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("pooling input must be 4-D (NHWC), got shape ", in_shape.DebugString()));
    }
    ASSIGN_OR_RETURN(Geom gs, MakeGeom(in_shape, attrs_.kh, attrs_.kw, in_shape.dim_size(3), attrs_, "pooling"));
    const Geom& g = gs;
    const TensorShape y_shape({g.n, g.oh, g.ow, g.c});
    if constexpr (K == PoolKind::kMax || K == PoolKind::kAvg) {
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, y_shape));
      if (y_shape.num_elements() == 0) return absl::OkStatus();
      const T* x = ctx->input(0).flat<T>().data();
      T* y = out->template flat<T>().data();
      if constexpr (K == PoolKind::kMax) {
        MaxPoolForward<T>(ctx, g, x, y);
      } else {
        AvgPoolForward<T>(ctx, g, x, y);
      }
    } else {
      const Tensor& dy = ctx->input(K == PoolKind::kMaxGrad ? 2 : 1);
      if (dy.shape() != y_shape) {
        return absl::InvalidArgumentError(absl::StrCat("grad has shape ", dy.shape().DebugString(),
                                                       " but pooling input ", in_shape.DebugString(), " gives ",
                                                       y_shape.DebugString()));
      }
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in_shape));
      if (in_shape.num_elements() == 0) return absl::OkStatus();
      T* dx = out->template flat<T>().data();
      if (y_shape.num_elements() == 0) {
        std::fill(dx, dx + in_shape.num_elements(), T(0));
        return absl::OkStatus();
      }
      if constexpr (K == PoolKind::kMaxGrad) {
        if (ctx->input(1).shape() == y_shape) {
          MaxPoolBackwardFromOutput<T>(ctx, g, ctx->input(0).flat<T>().data(), ctx->input(1).flat<T>().data(),
                                       dy.flat<T>().data(), dx);
        } else {
          MaxPoolBackward<T>(ctx, g, ctx->input(0).flat<T>().data(), dy.flat<T>().data(), dx);
        }
      } else {
        AvgPoolBackward<T>(ctx, g, dy.flat<T>().data(), dx);
      }
    }
    return absl::OkStatus();
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
void RegisterType(KernelRegistry* r, DataType dt) {
  r->Register<PoolOp<T, PoolKind::kMax>>("MaxPool", kCpu, dt);
  r->Register<PoolOp<T, PoolKind::kAvg>>("AvgPool", kCpu, dt);
  r->Register<PoolOp<T, PoolKind::kMaxGrad>>("MaxPoolGrad", kCpu, dt);
  r->Register<PoolOp<T, PoolKind::kAvgGrad>>("AvgPoolGrad", kCpu, dt);
}

}  // namespace

void RegisterPoolKernels(KernelRegistry* r) {
  RegisterType<float>(r, DT_FLOAT);
  RegisterType<double>(r, DT_DOUBLE);
}

}  // namespace distflow
