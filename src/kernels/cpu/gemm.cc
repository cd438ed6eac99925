#include "kernels/cpu/gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/dnnl/dnnl.h"

namespace distflow {
namespace {

// libgomp comes in as a dependency of libdnnl, but is not on our link line;
// its entry points are looked up once at run time.
struct OmpApi {
  void (*set_num_threads)(int) = nullptr;
  int (*get_max_threads)() = nullptr;
};

const OmpApi& Omp() {
  static const OmpApi api = [] {
    OmpApi a;
    a.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    a.get_max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (a.set_num_threads == nullptr || a.get_max_threads == nullptr) a = OmpApi();
    return a;
  }();
  return api;
}

absl::Status SgemmError(dnnl_status_t s, int64_t m, int64_t n, int64_t k) {
  return absl::InternalError(
      absl::StrCat("dnnl_sgemm failed with status ", static_cast<int>(s), " (m=", m, ", n=", n, ", k=", k, ")"));
}

}  // namespace

ScopedOmpThreads::ScopedOmpThreads(int threads) {
  const OmpApi& omp = Omp();
  if (omp.set_num_threads == nullptr) return;
  saved_ = omp.get_max_threads();
  if (saved_ != threads) omp.set_num_threads(std::max(1, threads));
}

ScopedOmpThreads::~ScopedOmpThreads() {
  const OmpApi& omp = Omp();
  if (omp.set_num_threads == nullptr || saved_ < 1) return;
  if (omp.get_max_threads() != saved_) omp.set_num_threads(saved_);
}

absl::Status Sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool,
                   GemmThreading threading) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return absl::OkStatus();
  }
  const char ta = transpose_a ? 'T' : 'N', tb = transpose_b ? 'T' : 'N';
  const int parallelism = IntraOpParallelism(pool);
  // Below ~1 MFLOP per thread, splitting costs more than it saves.
  const bool big = 2 * m * n * k >= int64_t{parallelism} * 1000000;
  if (threading == GemmThreading::kOmp || parallelism == 1 || !big || std::max(m, n) < 16) {
    ScopedOmpThreads threads(threading == GemmThreading::kOmp && big ? parallelism : 1);
    dnnl_status_t s = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (s != dnnl_success) return SgemmError(s, m, n, k);
    return absl::OkStatus();
  }
  // Split the larger of C's rows and columns into chunks, each a
  // single-threaded sgemm. Row r of op(A) starts at a + r*lda (N) or a + r
  // (T); column j of op(B) at b + j (N) or b + j*ldb (T). Chunks are claimed
  // dynamically by the caller and NumThreads() helpers, so a helper that starts
  // late (busy pool, stolen core) costs nothing: the caller waits only for
  // chunks to finish, never for helpers to start.
  struct Shared {
    char ta, tb;
    int64_t m, n, k, lda, ldb, ldc, chunk, num_chunks;
    float alpha, beta;
    const float* a;
    const float* b;
    float* c;
    bool by_rows;
    std::atomic<int64_t> next{0};
    absl::Mutex mu;
    int64_t done ABSL_GUARDED_BY(mu) = 0;
    dnnl_status_t error ABSL_GUARDED_BY(mu) = dnnl_success;

    // Runs chunks until none are left.
    void Work() {
      ScopedOmpThreads threads(1);
      for (int64_t i; (i = next.fetch_add(1)) < num_chunks;) {
        const int64_t begin = i * chunk, len = std::min(chunk, (by_rows ? m : n) - begin);
        dnnl_status_t s;
        if (by_rows) {
          s = dnnl_sgemm(ta, tb, len, n, k, alpha, ta == 'T' ? a + begin : a + begin * lda, lda, b, ldb, beta,
                         c + begin * ldc, ldc);
        } else {
          s = dnnl_sgemm(ta, tb, m, len, k, alpha, a, lda, tb == 'T' ? b + begin * ldb : b + begin, ldb, beta,
                         c + begin, ldc);
        }
        absl::MutexLock l(&mu);
        if (s != dnnl_success) error = s;
        ++done;
      }
    }
  };
  auto sh = std::make_shared<Shared>();
  sh->ta = ta, sh->tb = tb, sh->m = m, sh->n = n, sh->k = k, sh->lda = lda, sh->ldb = ldb, sh->ldc = ldc;
  sh->alpha = alpha, sh->beta = beta, sh->a = a, sh->b = b, sh->c = c;
  sh->by_rows = m >= n;
  const int64_t extent = sh->by_rows ? m : n;
  // About 4 chunks per thread for balance, but at least 64 rows/columns each
  // so that each sgemm still amortises its packing.
  sh->chunk = std::max<int64_t>({64, (extent + 4 * parallelism - 1) / (4 * parallelism)});
  sh->chunk = std::min(sh->chunk, (extent + parallelism - 1) / parallelism);
  sh->num_chunks = (extent + sh->chunk - 1) / sh->chunk;
  const int helpers = static_cast<int>(std::min<int64_t>(pool->NumThreads(), sh->num_chunks - 1));
  for (int i = 0; i < helpers; ++i) pool->Schedule([sh] { sh->Work(); });
  sh->Work();
  absl::MutexLock l(&sh->mu);
  sh->mu.Await(absl::Condition(
      +[](Shared* x) ABSL_EXCLUSIVE_LOCKS_REQUIRED(x->mu) { return x->done == x->num_chunks; }, sh.get()));
  if (sh->error != dnnl_success) return SgemmError(sh->error, m, n, k);
  return absl::OkStatus();
}

}  // namespace distflow
