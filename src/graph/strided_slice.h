// StridedSlice's rules (numpy basic indexing in TensorFlow's encoding),
// shared by its shape function (graph/ops/slice_ops.cc) and its kernels
// (kernels/cpu/slice_kernels.cc) so that a slice accepted when the graph is
// built gets the same shape, and the same error, when it runs.
//
// The "sparse" spec is what the op is given: begin/end/strides of length n
// and five bit masks over those n entries (begin, end, ellipsis, new_axis,
// shrink_axis). Resolving it against an input shape gives the "dense" spec,
// one (begin, stride, size) per input dimension, and the output shape
// (new axes added, shrunk axes removed). Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/graph.pb.h"

namespace distflow {

struct StridedSliceMasks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink_axis = 0;
};

// The five *_mask attributes of a StridedSlice or StridedSliceGrad node.
absl::StatusOr<StridedSliceMasks> ReadStridedSliceMasks(const proto::NodeDef& node);

struct StridedSliceDense {
  // Per input dimension: first index, step and number of elements taken
  // (kUnknown = -1 when the dimension or the begin/end values are unknown).
  std::vector<int64_t> begin, stride, size;
  // The output's shape, -1 for unknown dimensions.
  std::vector<int64_t> output_shape;
};

// Resolves the spec against `input` (dims may be -1 = unknown). `begin` and
// `end` may be absent (values unknown when the graph is built); `strides`
// must be known. InvalidArgument, naming the value, for a zero stride, more
// than one ellipsis, lengths that differ, too many indices for the rank, or
// a shrunk index out of range.
absl::StatusOr<StridedSliceDense> ResolveStridedSlice(absl::Span<const int64_t> input,
                                                      const std::optional<std::vector<int64_t>>& begin,
                                                      const std::optional<std::vector<int64_t>>& end,
                                                      const std::vector<int64_t>& strides,
                                                      const StridedSliceMasks& masks);

}  // namespace distflow
