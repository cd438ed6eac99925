// Reading and checking the ids of the sparse kernels (Gather, Scatter*,
// UnsortedSegmentSum, SparseApply*, ...): an int32/int64 tensor of any shape
// becomes a flat int64 vector, and an id outside [0, bound) is an error that
// names the op, the node, the position and the bound, so a bad id fed to a
// parameter server fails that step only. Header-only, stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "distflow/tensor.h"

namespace distflow::sparse_index {

// The values of `t` (int32 or int64, any shape), flattened.
inline absl::StatusOr<std::vector<int64_t>> Read(const Tensor& t, absl::string_view op, absl::string_view node,
                                                 absl::string_view what) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.NumElements()));
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) out.push_back(v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) out.push_back(v);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " (node '", node, "'): ", what, " must be int32 or int64, got ", DataTypeName(t.dtype())));
  }
  return out;
}

// OK if every id is in [0, bound); otherwise names the first that is not.
inline absl::Status CheckRange(const std::vector<int64_t>& ids, int64_t bound, absl::string_view op,
                               absl::string_view node, absl::string_view what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= bound) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, " (node '", node, "'): ", what, "[", i, "] = ", ids[i], " is not in [0, ", bound, ")"));
    }
  }
  return absl::OkStatus();
}

// Read then CheckRange.
inline absl::StatusOr<std::vector<int64_t>> ReadInRange(const Tensor& t, int64_t bound, absl::string_view op,
                                                        absl::string_view node, absl::string_view what) {
  absl::StatusOr<std::vector<int64_t>> ids = Read(t, op, node, what);
  if (!ids.ok()) return ids;
  RETURN_IF_ERROR(CheckRange(*ids, bound, op, node, what));
  return ids;
}

// Product of dims [from, end) of `s`.
inline int64_t InnerSize(const TensorShape& s, int from) {
  int64_t n = 1;
  for (int k = from; k < s.dims(); ++k) n *= s.dim_size(k);
  return n;
}

}  // namespace distflow::sparse_index
