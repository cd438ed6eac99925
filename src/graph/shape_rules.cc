#include "graph/shape_rules.h"

#include <cmath>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distflow/tensor_shape.h"

namespace distflow {
namespace {

std::string Dims(absl::Span<const int64_t> d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

template <typename T>
absl::StatusOr<int64_t> RangeSizeOf(T start, T limit, T delta) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Range requires finite start, limit and delta, got ", start, ", ", limit, ", ", delta));
    }
  }
  if (delta == 0) return absl::InvalidArgumentError("Requires delta != 0");
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(absl::StrCat("Requires start <= limit when delta > 0: ", start, "/", limit));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(absl::StrCat("Requires start >= limit when delta < 0: ", start, "/", limit));
  }
  if constexpr (std::is_integral_v<T>) {
    // In unsigned arithmetic: limit - start may overflow T.
    uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                              : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
    uint64_t n = span / step + (span % step != 0 ? 1 : 0);
    if (n > static_cast<uint64_t>(INT64_MAX)) return absl::InvalidArgumentError("Range has too many elements");
    return static_cast<int64_t>(n);
  } else {
    double n =
        std::ceil(std::abs((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta)));
    if (!(n < 9.2e18)) return absl::InvalidArgumentError("Range has too many elements");
    return static_cast<int64_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ResolveReshape(std::vector<int64_t> dims, int64_t num_elements,
                                                    absl::string_view input_shape) {
  int unknown_index = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown_index >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("only one input size may be -1, not both ", unknown_index, " and ", i));
      }
      unknown_index = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("size ", i, " must be non-negative, not ", dims[i]));
    } else if (!MultiplyWithoutOverflow(known, dims[i], &known)) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", Dims(dims), " has too many elements"));
    }
  }
  const int64_t n = num_elements;
  if (n < 0) return dims;  // the input's size is not known yet
  if (unknown_index >= 0) {
    if (known == 0) {
      if (n != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Cannot reshape a tensor with ", n, " elements to shape ", Dims(dims)));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "Reshape cannot infer the missing input size for an empty tensor unless all specified input sizes are "
          "non-zero: ",
          Dims(dims)));
    }
    if (n % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                     " values, but the requested shape ", Dims(dims),
                                                     " requires a multiple of ", known));
    }
    dims[static_cast<size_t>(unknown_index)] = n / known;
  } else if (known != n) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot reshape a tensor of shape ", input_shape, " with ", n,
                                                   " elements to shape ", Dims(dims), " with ", known, " elements"));
  }
  return dims;
}

absl::StatusOr<int64_t> RangeSize(int32_t start, int32_t limit, int32_t delta) {
  return RangeSizeOf(start, limit, delta);
}
absl::StatusOr<int64_t> RangeSize(int64_t start, int64_t limit, int64_t delta) {
  return RangeSizeOf(start, limit, delta);
}
absl::StatusOr<int64_t> RangeSize(float start, float limit, float delta) { return RangeSizeOf(start, limit, delta); }
absl::StatusOr<int64_t> RangeSize(double start, double limit, double delta) { return RangeSizeOf(start, limit, delta); }

absl::StatusOr<std::vector<bool>> ReductionMask(absl::Span<const int64_t> axes, int rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid reduction dimension ", a, " for input with ", rank, " dimensions"));
    }
    mask[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  return mask;
}

absl::StatusOr<std::vector<PartialShape>> DecodeShapeList(absl::Span<const int64_t> flat, absl::string_view what) {
  std::vector<PartialShape> out;
  for (size_t i = 0; i < flat.size();) {
    const int64_t rank = flat[i++];
    if (rank == -1) {
      out.push_back(PartialShape::Unknown());
      continue;
    }
    if (rank < -1 || rank > 64 || i + static_cast<size_t>(rank) > flat.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": malformed shape list ", Dims(flat), " (each shape is its rank, then its dimensions)"));
    }
    PartialShape s = PartialShape::Scalar();
    for (int64_t k = 0; k < rank; ++k) {
      const int64_t d = flat[i++];
      if (d < -1) return absl::InvalidArgumentError(absl::StrCat(what, ": dimension ", d, " in ", Dims(flat)));
      s.AppendDim(d);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace distflow
