// A small row-major GEMM wrapper over oneDNN's dnnl_sgemm, for MatMul and for
// other kernels that reduce to a matrix product (convolution and bias
// backprops, ...):
//
//   C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n]
//
// where op(X) is X or X^T. Matrices are row-major with leading dimensions
// lda/ldb/ldc (elements between rows as stored).
//
// Threading: Debian's oneDNN is built with the OpenMP CPU runtime
// (DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP). With `pool` null the call is
// single-threaded. Otherwise its parallelism is pool->NumThreads()+1 (the
// caller helps), used one of two ways:
//   kOmp:  one dnnl_sgemm with that many OpenMP threads;
//   kPool: the rows (or columns, if more) of C split into chunks claimed
//          dynamically by the caller and the pool's threads, each chunk a
//          single-threaded dnnl_sgemm.
// kOmp is the default: on idle cores it is oneDNN's own parallel sgemm (B
// packed once and shared), ~10-30% faster than kPool at 1024^3 on 2 cores.
// kPool degrades far more gracefully when the cores are oversubscribed
// (OpenMP's spinning barriers collapse; see docs/PERFORMANCE.md).
// Small products (< ~1 MFLOP per thread) run single-threaded. The calling
// thread's OpenMP thread count is restored afterwards.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "base/thread_pool.h"

namespace distflow {

enum class GemmThreading { kOmp, kPool };
inline constexpr GemmThreading kDefaultGemmThreading = GemmThreading::kOmp;

absl::Status Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool,
                   GemmThreading threading = kDefaultGemmThreading);

// The parallelism a kernel may use given its intra-op pool (null: 1).
inline int IntraOpParallelism(const ThreadPool* pool) { return pool == nullptr ? 1 : pool->NumThreads() + 1; }

// Runs fn with OpenMP's thread count for the calling thread set to `threads`,
// restoring it afterwards. A no-op wrapper when OpenMP is not loaded.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace distflow
