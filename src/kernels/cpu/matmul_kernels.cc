// MatMul kernels. float32 goes to oneDNN's sgemm (see gemm.h for threading);
// double, int32 and int64 use Eigen's dense product, split by rows of the
// output over the intra-op pool.
#include <algorithm>

// GCC 12 reports false "may be used uninitialized" warnings inside the AVX-512
// intrinsics Eigen's product kernels inline (-march=native).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
void EigenMatMul(OpKernelContext* ctx, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool transpose_a,
                 bool transpose_b) {
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  using Map = Eigen::Map<RowMatrix<T>>;
  // As stored: a is [m,k] or [k,m], b is [k,n] or [n,k].
  ConstMap am(a, transpose_a ? k : m, transpose_a ? m : k);
  ConstMap bm(b, transpose_b ? n : k, transpose_b ? k : n);
  Map cm(c, m, n);
  auto rows = [&](int64_t begin, int64_t end) {
    const Eigen::Index r0 = static_cast<Eigen::Index>(begin), nr = static_cast<Eigen::Index>(end - begin);
    auto out = cm.middleRows(r0, nr);
    if (!transpose_a && !transpose_b) {
      out.noalias() = am.middleRows(r0, nr) * bm;
    } else if (!transpose_a && transpose_b) {
      out.noalias() = am.middleRows(r0, nr) * bm.transpose();
    } else if (transpose_a && !transpose_b) {
      out.noalias() = am.middleCols(r0, nr).transpose() * bm;
    } else {
      out.noalias() = am.middleCols(r0, nr).transpose() * bm.transpose();
    }
  };
  ctx->ParallelFor(m, std::max<int64_t>(1, 2 * n * k), rows);
}

template <typename T>
class MatMulOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(bool ta, GetAttrBool(c->def(), "transpose_a"));
    ASSIGN_OR_RETURN(bool tb, GetAttrBool(c->def(), "transpose_b"));
    transpose_a_ = ta;
    transpose_b_ = tb;
    return absl::OkStatus();
  }

  // m*k*n multiply-adds; a vectorised gemm does about 16 in the time of one
  // pass over an element.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (in.size() != 2 || in[0].dims() != 2 || in[1].dims() != 2) return OpKernel::EstimatedWork(in);
    const int64_t n = in[1].dim_size(transpose_b_ ? 0 : 1);
    int64_t macs = 0;
    if (__builtin_mul_overflow(in[0].num_elements(), n, &macs)) return -1;
    return macs / 16;
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (a.dims() != 2 || b.dims() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("MatMul needs matrices: In[0]: ", a.shape().DebugString(),
                                                     ", In[1]: ", b.shape().DebugString()));
    }
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0);
    const int64_t k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    if (k != kb) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Matrix size-incompatible: In[0]: ", a.shape().DebugString(), ", In[1]: ", b.shape().DebugString(),
          transpose_a_ ? " (transpose_a)" : "", transpose_b_ ? " (transpose_b)" : ""));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({m, n})));
    if (m == 0 || n == 0) return absl::OkStatus();
    T* c = out->template flat<T>().data();
    if (k == 0) {
      std::fill(c, c + m * n, T(0));
      return absl::OkStatus();
    }
    const T* ap = a.flat<T>().data();
    const T* bp = b.flat<T>().data();
    if constexpr (std::is_same_v<T, float>) {
      return Sgemm(transpose_a_, transpose_b_, m, n, k, 1.0f, ap, a.dim_size(1), bp, b.dim_size(1), 0.0f, c, n,
                   ctx->intra_op_pool());
    } else {
      EigenMatMul<T>(ctx, ap, bp, c, m, n, k, transpose_a_, transpose_b_);
      return absl::OkStatus();
    }
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry* r) {
  r->Register<MatMulOp<float>>("MatMul", kCpu, DT_FLOAT);
  r->Register<MatMulOp<double>>("MatMul", kCpu, DT_DOUBLE);
  r->Register<MatMulOp<int32_t>>("MatMul", kCpu, DT_INT32);
  r->Register<MatMulOp<int64_t>>("MatMul", kCpu, DT_INT64);
}

}  // namespace distflow
