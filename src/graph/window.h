// Convolution and pooling windows (NHWC, TensorFlow's rules): the attributes
// of a Conv2D / MaxPool / AvgPool node and the output size and padding they
// give. Shared by the shape functions (graph/ops/nn_ops.cc) and the CPU
// kernels (kernels/cpu/conv_kernels.cc), so a graph accepted when it is built
// gets the same sizes when it runs. Stateless; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/graph.pb.h"

namespace distflow {

struct WindowAttrs {
  int64_t sh = 1, sw = 1;  // strides along height and width
  int64_t kh = 0, kw = 0;  // ksize along height and width (pools only)
  bool same = false;       // padding "SAME" (otherwise "VALID")
};

// Reads and validates `strides`, `ksize` (if `pool`), `padding` and
// `data_format` (only NHWC). Errors quote the offending attribute.
absl::StatusOr<WindowAttrs> ReadWindowAttrs(const proto::NodeDef& node, bool pool);

// One spatial dimension: output size and the padding before and after it.
struct WindowDim {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};

// TensorFlow's windowed output size for an input of `in`, a window of `k`
// and a stride of `s`. VALID with a window larger than the input is
// InvalidArgument naming `what` ("filter", "pooling").
absl::StatusOr<WindowDim> ComputeWindow(int64_t in, int64_t k, int64_t s, bool same, absl::string_view what);

}  // namespace distflow
