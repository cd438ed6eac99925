#include "graph/strided_slice.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = -1;
// An unknown begin or end (-1 is a valid end for a negative stride).
constexpr int64_t kUnknownBound = std::numeric_limits<int64_t>::min();

bool Bit(int64_t mask, size_t i) { return ((mask >> i) & 1) != 0; }

// Begin (is_begin) or end of one dimension of size `dim` for a step of sign
// `stride`, after masks, negative indices and clamping; kUnknown if either
// the value or the size is unknown (kUnknownBound).
int64_t Bound(bool masked, const std::optional<std::vector<int64_t>>& values, size_t i, int64_t dim, int64_t stride,
              bool is_begin) {
  if (dim < 0) return kUnknownBound;
  if (masked && is_begin) return stride > 0 ? 0 : dim - 1;
  if (masked) return stride > 0 ? dim : -1;
  if (!values) return kUnknownBound;
  int64_t v = (*values)[i];
  if (v < 0) v += dim;
  return stride > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
}

}  // namespace

absl::StatusOr<StridedSliceMasks> ReadStridedSliceMasks(const proto::NodeDef& node) {
  StridedSliceMasks m;
  std::pair<const char*, int64_t*> fields[] = {{"begin_mask", &m.begin},
                                               {"end_mask", &m.end},
                                               {"ellipsis_mask", &m.ellipsis},
                                               {"new_axis_mask", &m.new_axis},
                                               {"shrink_axis_mask", &m.shrink_axis}};
  for (auto& [name, field] : fields) {
    ASSIGN_OR_RETURN(int64_t v, GetAttrInt(node, name));
    *field = v;
  }
  return m;
}

absl::StatusOr<StridedSliceDense> ResolveStridedSlice(absl::Span<const int64_t> input,
                                                      const std::optional<std::vector<int64_t>>& begin,
                                                      const std::optional<std::vector<int64_t>>& end,
                                                      const std::vector<int64_t>& strides,
                                                      const StridedSliceMasks& masks) {
  const size_t n = strides.size();
  if ((begin && begin->size() != n) || (end && end->size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat("StridedSlice: begin, end and strides must have the same length, ",
                                                   "got ", begin ? begin->size() : n, ", ", end ? end->size() : n,
                                                   " and ", n));
  }
  if (masks.ellipsis & (masks.ellipsis - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StridedSlice: at most one ellipsis is allowed, ellipsis_mask is ", masks.ellipsis));
  }
  const int64_t rank = static_cast<int64_t>(input.size());
  int64_t real = 0;  // entries that consume an input dimension
  bool has_ellipsis = false;
  for (size_t i = 0; i < n; ++i) {
    if (Bit(masks.ellipsis, i)) {
      has_ellipsis = true;
    } else if (!Bit(masks.new_axis, i)) {
      ++real;
    }
  }
  if (real > rank) {
    return absl::InvalidArgumentError(absl::StrCat("StridedSlice: ", real, " indices for an input of rank ", rank,
                                                   " (shape [", absl::StrJoin(input, ","), "])"));
  }
  StridedSliceDense d;
  auto full = [&](int64_t dim) {  // an axis taken whole (ellipsis or implicit)
    const int64_t k = static_cast<int64_t>(d.begin.size());
    d.begin.push_back(0);
    d.stride.push_back(1);
    d.size.push_back(input[static_cast<size_t>(k)]);
    d.output_shape.push_back(dim);
  };
  for (size_t i = 0; i < n; ++i) {
    if (Bit(masks.ellipsis, i)) {
      for (int64_t k = 0; k < rank - real; ++k) full(input[d.begin.size()]);
      continue;
    }
    if (Bit(masks.new_axis, i)) {
      d.output_shape.push_back(1);
      continue;
    }
    const int64_t s = strides[i];
    if (s == 0) return absl::InvalidArgumentError(absl::StrCat("StridedSlice: strides[", i, "] must be non-zero"));
    const size_t k = d.begin.size();
    const int64_t dim = input[k];
    if (Bit(masks.shrink_axis, i)) {
      int64_t idx = begin ? (*begin)[i] : kUnknown;
      if (begin && dim >= 0) {
        if (idx < -dim || idx >= dim) {
          return absl::InvalidArgumentError(absl::StrCat("StridedSlice: index ", (*begin)[i], " of dimension ", k,
                                                         " is out of bounds for size ", dim));
        }
        if (idx < 0) idx += dim;
      } else {
        idx = kUnknown;
      }
      d.begin.push_back(idx);
      d.stride.push_back(1);
      d.size.push_back(1);
      continue;
    }
    const int64_t b = Bound(Bit(masks.begin, i), begin, i, dim, s, true);
    const int64_t e = Bound(Bit(masks.end, i), end, i, dim, s, false);
    int64_t size = kUnknown;
    if (b != kUnknownBound && e != kUnknownBound) {
      size = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s) : std::max<int64_t>(0, (b - e + (-s) - 1) / (-s));
    }
    d.begin.push_back(b == kUnknownBound ? kUnknown : b);
    d.stride.push_back(s);
    d.size.push_back(size);
    d.output_shape.push_back(size);
  }
  // An implicit ellipsis at the end takes the dimensions left.
  if (!has_ellipsis) {
    while (static_cast<int64_t>(d.begin.size()) < rank) full(input[d.begin.size()]);
  }
  return d;
}

}  // namespace distflow
