// Kernels for TopKV2, InTopKV2, LRN and LRNGrad. Rows (the last dimension)
// are independent and split across the intra-op pool. TopKV2 orders by value,
// larger first, ties to the lower index (TensorFlow's order); LRN's window
// over channels is clipped at the edges.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

template <typename T>
class TopKOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(int64_t k, kernel_util::ReadScalarInt(ctx->input(1), "TopKV2 k"));
    if (in.dims() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("TopKV2: input must have rank >= 1, got shape ", in.shape().DebugString()));
    }
    const int64_t n = in.dim_size(in.dims() - 1);
    if (k < 0 || k > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("TopKV2: k = ", k, " must be in [0, ", n, "] for input of shape ", in.shape().DebugString()));
    }
    std::vector<int64_t> dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
    dims.back() = k;
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * values, ctx->allocate_output(0, shape));
    ASSIGN_OR_RETURN(Tensor * indices, ctx->allocate_output(1, shape));
    const int64_t rows = n == 0 ? 0 : in.NumElements() / n;
    if (k == 0 || rows == 0) return absl::OkStatus();
    const T* x = in.flat<T>().data();
    T* v = values->flat<T>().data();
    int32_t* ix = indices->flat<int32_t>().data();
    ctx->ParallelFor(rows, n * 4, [&](int64_t r0, int64_t r1) {
      std::vector<int32_t> order(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = x + r * n;
        std::iota(order.begin(), order.end(), 0);
        auto before = [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          ix[r * k + j] = order[static_cast<size_t>(j)];
          v[r * k + j] = row[order[static_cast<size_t>(j)]];
        }
      }
    });
    return absl::OkStatus();
  }
};

template <typename I>
class InTopKOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& p = ctx->input(0);
    const Tensor& t = ctx->input(1);
    ASSIGN_OR_RETURN(int64_t k, kernel_util::ReadScalarInt(ctx->input(2), "InTopKV2 k"));
    if (p.dims() != 2 || t.dims() != 1 || t.dim_size(0) != p.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat("InTopKV2: predictions ", p.shape().DebugString(),
                                                     " must be a matrix and targets ", t.shape().DebugString(),
                                                     " a vector of its batch size"));
    }
    const int64_t batch = p.dim_size(0), classes = p.dim_size(1);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({batch})));
    const float* pred = p.flat<float>().data();
    const I* target = t.flat<I>().data();
    bool* o = out->flat<bool>().data();
    for (int64_t b = 0; b < batch; ++b) {
      const I c = target[b];
      // Out-of-range targets and non-finite predictions are never in the top k.
      if (c < 0 || c >= classes || !std::isfinite(pred[b * classes + c])) {
        o[b] = false;
        continue;
      }
      const float v = pred[b * classes + c];
      int64_t greater = 0;
      for (int64_t j = 0; j < classes; ++j) greater += pred[b * classes + j] > v ? 1 : 0;
      o[b] = greater < k;
    }
    return absl::OkStatus();
  }
};

struct LrnParams {
  int64_t radius = 5;
  double bias = 1, alpha = 1, beta = 0.5;
};

absl::StatusOr<LrnParams> ReadLrn(const proto::NodeDef& def) {
  LrnParams p;
  ASSIGN_OR_RETURN(p.radius, GetAttrInt(def, "depth_radius"));
  ASSIGN_OR_RETURN(p.bias, GetAttrFloat(def, "bias"));
  ASSIGN_OR_RETURN(p.alpha, GetAttrFloat(def, "alpha"));
  ASSIGN_OR_RETURN(p.beta, GetAttrFloat(def, "beta"));
  if (p.radius < 0) return absl::InvalidArgumentError(absl::StrCat("LRN: depth_radius must be >= 0, got ", p.radius));
  return p;
}

// norm[c] = bias + alpha * sum of x[c']^2 for |c' - c| <= radius, one row.
template <typename T>
void Norms(const T* x, int64_t depth, const LrnParams& p, double* norm) {
  for (int64_t c = 0; c < depth; ++c) {
    double s = 0;
    for (int64_t j = std::max<int64_t>(0, c - p.radius); j <= std::min(depth - 1, c + p.radius); ++j) {
      s += static_cast<double>(x[j]) * static_cast<double>(x[j]);
    }
    norm[c] = p.bias + p.alpha * s;
  }
}

// LRN (grad = false): y = x * norm^-beta. LRNGrad (inputs g, x, y):
// dx[j] = g[j] norm[j]^-beta - 2 alpha beta x[j] sum_{|i-j|<=r} g[i] x[i] norm[i]^(-beta-1).
template <typename T, bool kGrad>
class LrnOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(p_, ReadLrn(c->def()));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(kGrad ? 1 : 0);
    if (x.dims() != 4) {
      return absl::InvalidArgumentError(absl::StrCat("LRN: input must be 4-D, got shape ", x.shape().DebugString()));
    }
    if (kGrad && ctx->input(0).shape() != x.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("LRNGrad: input_grads ", ctx->input(0).shape().DebugString(),
                                                     " and input_image ", x.shape().DebugString(), " differ"));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, x.shape()));
    const int64_t depth = x.dim_size(3);
    const int64_t rows = depth == 0 ? 0 : x.NumElements() / depth;
    const T* xs = x.flat<T>().data();
    const T* gs = kGrad ? ctx->input(0).flat<T>().data() : nullptr;
    T* o = out->flat<T>().data();
    ctx->ParallelFor(rows, depth * (2 * p_.radius + 20), [&](int64_t r0, int64_t r1) {
      std::vector<double> norm(static_cast<size_t>(depth)), gxn(static_cast<size_t>(depth));
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = xs + r * depth;
        Norms(xr, depth, p_, norm.data());
        for (int64_t c = 0; c < depth; ++c) {
          const double scale = std::pow(norm[c], -p_.beta);
          if constexpr (!kGrad) {
            o[r * depth + c] = static_cast<T>(xr[c] * scale);
          } else {
            gxn[c] = static_cast<double>(gs[r * depth + c]) * xr[c] * scale / norm[c];
          }
        }
        if constexpr (kGrad) {
          for (int64_t j = 0; j < depth; ++j) {
            double s = 0;
            for (int64_t i = std::max<int64_t>(0, j - p_.radius); i <= std::min(depth - 1, j + p_.radius); ++i) {
              s += gxn[i];
            }
            o[r * depth + j] =
                static_cast<T>(gs[r * depth + j] * std::pow(norm[j], -p_.beta) - 2 * p_.alpha * p_.beta * xr[j] * s);
          }
        }
      }
    });
    return absl::OkStatus();
  }

 private:
  LrnParams p_;
};

}  // namespace

void RegisterTopKLrnKernels(KernelRegistry* r) {
  r->Register<TopKOp<float>>("TopKV2", kCpu, DT_FLOAT);
  r->Register<TopKOp<double>>("TopKV2", kCpu, DT_DOUBLE);
  r->Register<TopKOp<int32_t>>("TopKV2", kCpu, DT_INT32);
  r->Register<TopKOp<int64_t>>("TopKV2", kCpu, DT_INT64);
  r->Register<InTopKOp<int32_t>>("InTopKV2", kCpu, DT_INT32);
  r->Register<InTopKOp<int64_t>>("InTopKV2", kCpu, DT_INT64);
  r->Register<LrnOp<float, false>>("LRN", kCpu, DT_FLOAT);
  r->Register<LrnOp<double, false>>("LRN", kCpu, DT_DOUBLE);
  r->Register<LrnOp<float, true>>("LRNGrad", kCpu, DT_FLOAT);
  r->Register<LrnOp<double, true>>("LRNGrad", kCpu, DT_DOUBLE);
}

}  // namespace distflow
