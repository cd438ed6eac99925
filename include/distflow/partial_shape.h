// PartialShape: what graph construction knows about a tensor's shape before it
// runs: the rank may be unknown, and any dimension may be unknown (-1). Used by
// shape inference; a runtime Tensor always has a full TensorShape.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "distflow/export.h"
#include "distflow/tensor_shape.h"

namespace distflow {
namespace proto {
class TensorShapeProto;
}

class DISTFLOW_EXPORT PartialShape {
 public:
  static constexpr int64_t kUnknownDim = -1;

  PartialShape() : unknown_rank_(true) {}  // nothing known
  PartialShape(std::initializer_list<int64_t> dims) : unknown_rank_(false), dims_(dims) {}
  explicit PartialShape(absl::Span<const int64_t> dims) : unknown_rank_(false), dims_(dims.begin(), dims.end()) {}
  explicit PartialShape(const TensorShape& s) : PartialShape(s.dim_sizes()) {}

  static PartialShape Unknown() { return PartialShape(); }
  static PartialShape UnknownOfRank(int rank);
  static PartialShape Scalar() { return PartialShape(absl::Span<const int64_t>()); }

  bool unknown_rank() const { return unknown_rank_; }
  int rank() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  bool IsFullyDefined() const;
  // The element count if fully defined, else -1.
  int64_t num_elements() const;

  // True if a tensor of shape `s` fits this partial shape.
  bool IsCompatibleWith(const TensorShape& s) const;
  bool IsCompatibleWith(const PartialShape& s) const;
  // The most specific shape compatible with both, or InvalidArgument naming both.
  absl::StatusOr<PartialShape> Merge(const PartialShape& other) const;
  // A full TensorShape, or InvalidArgument if anything is unknown.
  absl::StatusOr<TensorShape> ToTensorShape() const;

  void AppendDim(int64_t d) { dims_.push_back(d); }

  bool operator==(const PartialShape& o) const { return unknown_rank_ == o.unknown_rank_ && dims_ == o.dims_; }
  // "[?,784]"; "<unknown>" for unknown rank.
  std::string DebugString() const;

  void ToProto(proto::TensorShapeProto* out) const;
  // Validates: dims >= -1, rank bounded.
  static absl::StatusOr<PartialShape> FromProto(const proto::TensorShapeProto& p);

 private:
  bool unknown_rank_;
  absl::InlinedVector<int64_t, 4> dims_;
};

}  // namespace distflow
