// TensorShape: the fully known dimensions of a tensor. A scalar has rank 0; a
// dimension may be 0. The element count is kept and is always representable:
// every way of building a shape checks for int64 overflow.
//
// Value type; not thread-safe for concurrent mutation (like std::vector).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "distflow/export.h"

namespace distflow {

class DISTFLOW_EXPORT TensorShape {
 public:
  static constexpr int kMaxRank = 32;

  TensorShape() = default;  // a scalar
  // For shapes written in code; CHECK-fails on a negative or overflowing dim.
  // Use FromDims for shapes that come from input.
  TensorShape(std::initializer_list<int64_t> dims);
  explicit TensorShape(absl::Span<const int64_t> dims);

  // Validates dims from untrusted input: rank <= kMaxRank, every dim >= 0,
  // element count fits in int64.
  static absl::StatusOr<TensorShape> FromDims(absl::Span<const int64_t> dims);

  int dims() const { return static_cast<int>(dims_.size()); }
  int64_t dim_size(int i) const { return dims_[static_cast<size_t>(i)]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  int64_t num_elements() const { return num_elements_; }

  bool IsScalar() const { return dims_.empty(); }
  bool IsVector() const { return dims_.size() == 1; }
  bool IsMatrix() const { return dims_.size() == 2; }

  // Mutators; each returns InvalidArgument instead of overflowing.
  absl::Status AddDim(int64_t size);
  absl::Status SetDim(int i, int64_t size);
  void RemoveDim(int i);

  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return !(*this == o); }

  // "[2,3]"; "[]" for a scalar.
  std::string DebugString() const;

 private:
  absl::Status Recompute();

  absl::InlinedVector<int64_t, 4> dims_;
  int64_t num_elements_ = 1;
};

// Multiplies a * b, returning false instead of overflowing (both >= 0).
DISTFLOW_EXPORT bool MultiplyWithoutOverflow(int64_t a, int64_t b, int64_t* out);

}  // namespace distflow
