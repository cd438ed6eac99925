// Random kernels: RandomUniform, RandomStandardNormal, TruncatedNormal.
//
// Each kernel owns a std::mt19937_64 guarded by a mutex, so successive runs
// continue one stream. With seed or seed2 non-zero the stream is seeded from
// std::seed_seq over (seed, seed2) and is therefore reproducible run by run;
// with both zero it is seeded from std::random_device. Values are derived from
// raw 64-bit draws with our own transforms (not std::*_distribution, whose
// algorithms are implementation-defined), so sequences are portable.
#include <cmath>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

enum class Dist { kUniform, kNormal, kTruncatedNormal };

// Uniform in [0, 1): the top mantissa-width bits of a 64-bit draw.

class RandomOpBase : public OpKernel {
 public:
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  using OpKernel::OpKernel;

  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(int64_t seed, GetAttrInt(c->def(), "seed"));
    ASSIGN_OR_RETURN(int64_t seed2, GetAttrInt(c->def(), "seed2"));
    absl::MutexLock l(&mu_);
    kernel_util::SeedGenerator(&gen_, seed, seed2);
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<TensorShape> OutputShape(OpKernelContext* ctx) const {
    const Tensor& s = ctx->input(0);
    if (s.dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape must be a vector, got a tensor of shape ", s.shape().DebugString()));
    }
    std::vector<int64_t> dims;
    if (s.dtype() == DT_INT32) {
      for (int32_t v : s.flat<int32_t>()) dims.push_back(v);
    } else if (s.dtype() == DT_INT64) {
      for (int64_t v : s.flat<int64_t>()) dims.push_back(v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("shape must be int32 or int64, got ", DataTypeName(s.dtype())));
    }
    return TensorShape::FromDims(dims);
  }

  mutable absl::Mutex mu_;
  mutable std::mt19937_64 gen_ ABSL_GUARDED_BY(mu_);
};

template <typename T, Dist D>
class RandomOp : public RandomOpBase {
 public:
  using RandomOpBase::RandomOpBase;

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(ctx));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    absl::Span<T> v = out->template flat<T>();
    absl::MutexLock l(&mu_);
    if constexpr (D == Dist::kUniform) {
      for (T& x : v) x = kernel_util::UniformFrom<T>(gen_());
    } else {
      size_t i = 0;
      while (i < v.size()) {
        // Box-Muller: two independent standard normals per pair of uniforms.
        const double u1 = 1.0 - kernel_util::UniformFrom<double>(gen_());  // (0, 1]
        const double u2 = kernel_util::UniformFrom<double>(gen_());
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double theta = 2.0 * M_PI * u2;
        for (double z : {r * std::cos(theta), r * std::sin(theta)}) {
          if (i == v.size()) break;
          if constexpr (D == Dist::kTruncatedNormal) {
            if (std::fabs(z) > 2.0) continue;  // resample beyond 2 stddev
          }
          v[i++] = static_cast<T>(z);
        }
      }
    }
    return absl::OkStatus();
  }
};

template <Dist D>
void RegisterDist(KernelRegistry* r, const char* op) {
  r->Register<RandomOp<float, D>>(op, kCpu, DT_FLOAT, "dtype");
  r->Register<RandomOp<double, D>>(op, kCpu, DT_DOUBLE, "dtype");
}

}  // namespace

void RegisterRandomKernels(KernelRegistry* r) {
  RegisterDist<Dist::kUniform>(r, "RandomUniform");
  RegisterDist<Dist::kNormal>(r, "RandomStandardNormal");
  RegisterDist<Dist::kTruncatedNormal>(r, "TruncatedNormal");
}

}  // namespace distflow
