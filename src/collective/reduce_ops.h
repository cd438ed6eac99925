// The element-wise arithmetic of collectives: merging one rank's values into
// another's (merge_op) and the final op (Div by the group size), over the
// dtypes the collective ops take (float32, float64, int32, int64). Pure
// functions; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "distflow/tensor.h"
#include "kernels/collective.h"

namespace distflow {

// dst[i] = merge(dst[i], src[i]); InvalidArgument if dtypes or element
// counts differ, or the dtype is not one of the four.
absl::Status MergeInto(MergeOp op, const Tensor& src, Tensor* dst);
// Div: dst[i] /= group_size (integer division for integers, as TensorFlow).
absl::Status ApplyFinal(FinalOp op, int group_size, Tensor* dst);
bool IsCollectiveDtype(DataType dt);

}  // namespace distflow
