// Small helpers shared by the CPU kernel families: reading int32/int64
// shape-like inputs with clear errors, printing dims, copy costs, and the seeded random
// generators of the stateful random kernels (RandomUniform & co, Dropout).
// Header-only; everything here is stateless except the caller's generator.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "distflow/tensor.h"

namespace distflow {
namespace kernel_util {

inline std::string DimsString(absl::Span<const int64_t> d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// The values of an int32/int64 tensor that must be a vector (or, if
// allow_scalar, a scalar).
inline absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, absl::string_view what,
                                                     bool allow_scalar = false) {
  if (t.dims() > 1 || (t.dims() == 0 && !allow_scalar)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a ", allow_scalar ? "scalar or " : "",
                                                   "vector, got shape ", t.shape().DebugString()));
  }
  std::vector<int64_t> out;
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) out.push_back(v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) out.push_back(v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be int32 or int64, got ", DataTypeName(t.dtype())));
  }
  return out;
}

// The product of a shape-like input's values times factor, or -1 if it is
// not one or the product overflows (a WorkFromValues estimate:
// kernels/work_from_values.h).
inline int64_t ProductOfValues(const Tensor* t, absl::string_view what, int64_t factor = 1) {
  if (t == nullptr) return -1;
  absl::StatusOr<std::vector<int64_t>> v = ReadInts(*t, what, /*allow_scalar=*/true);
  if (!v.ok()) return -1;
  int64_t n = factor;
  for (int64_t d : *v) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) return -1;
    n *= d;
  }
  return n;
}

// The value of an int32/int64 scalar tensor.
inline absl::StatusOr<int64_t> ReadScalarInt(const Tensor& t, absl::string_view what) {
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT32) return t.scalar<int32_t>();
  if (t.dtype() == DT_INT64) return t.scalar<int64_t>();
  return absl::InvalidArgumentError(absl::StrCat(what, " must be int32 or int64, got ", DataTypeName(t.dtype())));
}

// The N-d loop of the copying kernels (Slice, StridedSlice, Transpose, Tile):
// visits rows [begin, end) of a row-major array of shape `dims` (rank >= 1;
// its innermost dimension is the row) in order, calling fn(row, idx) where
// idx[d] is the row's index along each outer dimension d < rank - 1.
template <typename Fn>
void ForEachRow(absl::Span<const int64_t> dims, int64_t begin, int64_t end, Fn&& fn) {
  const int outer = static_cast<int>(dims.size()) - 1;
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t rem = begin;
  for (int d = outer - 1; d >= 0; --d) {
    idx[d] = rem % dims[d];
    rem /= dims[d];
  }
  for (int64_t r = begin; r < end; ++r) {
    fn(r, static_cast<const int64_t*>(idx.data()));
    for (int d = outer - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

// Rough cycles to copy one element of `dt` (strings allocate), for ParallelFor costs.
inline int64_t CopyCost(DataType dt) { return dt == DT_STRING ? 50 : 1; }

// Seeds `gen` from the op's (seed, seed2) attributes: reproducible when either
// is non-zero, from std::random_device otherwise.
inline void SeedGenerator(std::mt19937_64* gen, int64_t seed, int64_t seed2) {
  if (seed != 0 || seed2 != 0) {
    const uint64_t s1 = static_cast<uint64_t>(seed), s2 = static_cast<uint64_t>(seed2);
    std::seed_seq seq{static_cast<uint32_t>(s1), static_cast<uint32_t>(s1 >> 32), static_cast<uint32_t>(s2),
                      static_cast<uint32_t>(s2 >> 32)};
    gen->seed(seq);
  } else {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    gen->seed(seq);
  }
}

// A uniform value in [0, 1) from 64 random bits (24 bits for float, 53 for
// double), independent of the standard library's distributions.
template <typename T>
T UniformFrom(uint64_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
  } else {
    return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
  }
}

}  // namespace kernel_util
}  // namespace distflow
