#include "distflow/partial_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/tensor.pb.h"

namespace distflow {

PartialShape PartialShape::UnknownOfRank(int rank) {
  PartialShape s = Scalar();
  for (int i = 0; i < rank; ++i) s.AppendDim(kUnknownDim);
  return s;
}

bool PartialShape::IsFullyDefined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_)
    if (d < 0) return false;
  return true;
}

int64_t PartialShape::num_elements() const {
  if (!IsFullyDefined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_)
    if (!MultiplyWithoutOverflow(n, d, &n)) return -1;
  return n;
}

bool PartialShape::IsCompatibleWith(const TensorShape& s) const { return IsCompatibleWith(PartialShape(s)); }

bool PartialShape::IsCompatibleWith(const PartialShape& s) const {
  if (unknown_rank_ || s.unknown_rank_) return true;
  if (dims_.size() != s.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] >= 0 && s.dims_[i] >= 0 && dims_[i] != s.dims_[i]) return false;
  }
  return true;
}

absl::StatusOr<PartialShape> PartialShape::Merge(const PartialShape& other) const {
  if (!IsCompatibleWith(other)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shapes ", DebugString(), " and ", other.DebugString(), " are incompatible"));
  }
  if (unknown_rank_) return other;
  if (other.unknown_rank_) return *this;
  PartialShape out = *this;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (out.dims_[i] < 0) out.dims_[i] = other.dims_[i];
  }
  return out;
}

absl::StatusOr<TensorShape> PartialShape::ToTensorShape() const {
  if (!IsFullyDefined()) {
    return absl::InvalidArgumentError(absl::StrCat("Shape ", DebugString(), " is not fully defined"));
  }
  return TensorShape::FromDims(dims_);
}

std::string PartialShape::DebugString() const {
  if (unknown_rank_) return "<unknown>";
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ",";
    out += dims_[i] < 0 ? "?" : std::to_string(dims_[i]);
  }
  return out + "]";
}

void PartialShape::ToProto(proto::TensorShapeProto* out) const {
  out->Clear();
  if (unknown_rank_) {
    out->set_unknown_rank(true);
    return;
  }
  for (int64_t d : dims_) out->add_dim(d);
}

absl::StatusOr<PartialShape> PartialShape::FromProto(const proto::TensorShapeProto& p) {
  if (p.unknown_rank()) return PartialShape::Unknown();
  if (p.dim_size() > TensorShape::kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shape of rank ", p.dim_size(), " exceeds the maximum rank ", TensorShape::kMaxRank));
  }
  PartialShape s = Scalar();
  for (int64_t d : p.dim()) {
    if (d < -1) return absl::InvalidArgumentError(absl::StrCat("Shape has invalid dimension ", d));
    s.AppendDim(d);
  }
  return s;
}

}  // namespace distflow
