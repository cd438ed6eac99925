// Shape rules that both shape inference (graph/ops/) and the CPU kernels
// (kernels/cpu/) apply, written once so that a graph accepted when it is
// built gets the same answer, and the same error, when it runs — as
// graph/window.h does for convolution and pooling. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "distflow/partial_shape.h"

namespace distflow {

// Reshape's target: `requested` (at most one -1, every other size >= 0) for
// an input of `num_elements` elements described by `input_shape` (for the
// errors). The -1 is resolved; with `num_elements` unknown (-1) it stays -1
// and only the request itself is checked. InvalidArgument, in TensorFlow's
// words, when the sizes cannot match.
absl::StatusOr<std::vector<int64_t>> ResolveReshape(std::vector<int64_t> requested, int64_t num_elements,
                                                    absl::string_view input_shape);

// The number of elements of Range(start, limit, delta); InvalidArgument for a
// zero delta, a delta that moves away from limit, non-finite floating-point
// arguments, or more than INT64_MAX elements.
absl::StatusOr<int64_t> RangeSize(int32_t start, int32_t limit, int32_t delta);
absl::StatusOr<int64_t> RangeSize(int64_t start, int64_t limit, int64_t delta);
absl::StatusOr<int64_t> RangeSize(float start, float limit, float delta);
absl::StatusOr<int64_t> RangeSize(double start, double limit, double delta);

// Reduction axes (negative ones count from the end) over an input of `rank`
// dimensions, as a per-dimension mask; InvalidArgument naming an axis out of
// [-rank, rank).
absl::StatusOr<std::vector<bool>> ReductionMask(absl::Span<const int64_t> axes, int rank);

// Shapes as the queue and parsing ops carry them (an attribute of kind
// list(int)): each shape as its rank, then its dimensions; -1 for an unknown
// rank or dimension. [2, 3, -1, 0] is {[3,?], []}. InvalidArgument naming
// `what` if the list is malformed.
absl::StatusOr<std::vector<PartialShape>> DecodeShapeList(absl::Span<const int64_t> flat, absl::string_view what);

}  // namespace distflow
