#include "distflow/tensor_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace distflow {

bool MultiplyWithoutOverflow(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

TensorShape::TensorShape(std::initializer_list<int64_t> dims)
    : TensorShape(absl::Span<const int64_t>(dims.begin(), dims.size())) {}

TensorShape::TensorShape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {
  absl::Status s = Recompute();
  CHECK(s.ok()) << s;
}

absl::StatusOr<TensorShape> TensorShape::FromDims(absl::Span<const int64_t> dims) {
  TensorShape shape;
  shape.dims_.assign(dims.begin(), dims.end());
  RETURN_IF_ERROR(shape.Recompute());
  return shape;
}

absl::Status TensorShape::Recompute() {
  if (dims_.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shape has rank ", dims_.size(), "; the maximum rank is ", kMaxRank));
  }
  bool has_zero = false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Dimension ", i, " of shape [", absl::StrJoin(dims_, ","), "] is negative"));
    }
    has_zero |= dims_[i] == 0;
  }
  if (has_zero) {
    num_elements_ = 0;
    return absl::OkStatus();
  }
  int64_t n = 1;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (!MultiplyWithoutOverflow(n, dims_[i], &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Shape [", absl::StrJoin(dims_, ","), "] has more elements than fit in int64"));
    }
  }
  num_elements_ = n;
  return absl::OkStatus();
}

absl::Status TensorShape::AddDim(int64_t size) {
  dims_.push_back(size);
  absl::Status s = Recompute();
  if (!s.ok()) {
    dims_.pop_back();
    (void)Recompute();
  }
  return s;
}

absl::Status TensorShape::SetDim(int i, int64_t size) {
  if (i < 0 || i >= dims()) {
    return absl::OutOfRangeError(absl::StrCat("SetDim(", i, ") on shape ", DebugString()));
  }
  int64_t old = dims_[static_cast<size_t>(i)];
  dims_[static_cast<size_t>(i)] = size;
  absl::Status s = Recompute();
  if (!s.ok()) {
    dims_[static_cast<size_t>(i)] = old;
    (void)Recompute();
  }
  return s;
}

void TensorShape::RemoveDim(int i) {
  CHECK(i >= 0 && i < dims()) << "RemoveDim(" << i << ") on shape " << DebugString();
  dims_.erase(dims_.begin() + i);
  CHECK_OK(Recompute());
}

std::string TensorShape::DebugString() const { return absl::StrCat("[", absl::StrJoin(dims_, ","), "]"); }

}  // namespace distflow
