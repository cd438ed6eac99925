// TensorArrays for graphs built in C++: TensorFlow's TensorArray ops over a
// resource of the step. An array is a handle (which array) and a flow (a
// float scalar that orders the ops on it); writes store an element and return
// a new flow, reads take the flow they must follow.
//
//   // out[t] = x[t] * x[t] in a loop, then stacked
//   auto in = ops::TensorArray(root, DT_DOUBLE, n);
//   Output in_flow = ops::TensorArrayUnstack(root, in.handle, x, in.flow);
//   auto out = ops::TensorArray(root, DT_DOUBLE, n);
//   ... WhileLoop over {t, out.flow}, the handles (and in_flow) as invariants:
//       Output xt = ops::TensorArrayRead(b, in_h, t, in_f, DT_DOUBLE);
//       Output next_flow = ops::TensorArrayWrite(b, out_h, t, xt * xt, flow);
//   Output y = ops::TensorArrayStack(root, out.handle, final_flow, DT_DOUBLE);
//
// A write stores the element without copying it: a loop of N writes costs
// O(N). Gradients flow through every op below (a gradient array per
// Gradients call, TensorArrayGradV3 with the call's name scope as source),
// also inside while loops. Reading an index never written gives zeros when
// the element shape is known; writing an index twice keeps the last value.
// The array lives until the step ends (a handle is not valid in another run).
//
// Thread-safety: like Scope (one builder thread per graph).
#pragma once

#include <string>
#include <utility>

#include "distflow/export.h"
#include "distflow/partial_shape.h"
#include "distflow/scope.h"

namespace distflow {
namespace ops {

struct TensorArrayOptions {
  bool dynamic_size = false;  // grows when written past its size
  PartialShape element_shape = PartialShape::Unknown();
  std::string name;  // tensor_array_name, for errors; empty: the node's name
};

struct TensorArrayOutput {
  Output handle;  // string [2]
  Output flow;    // float scalar
};

// A new array of `size` (an int32 scalar) elements of `dtype`.
DISTFLOW_EXPORT TensorArrayOutput TensorArray(const Scope& s, DataType dtype, const Output& size,
                                              const TensorArrayOptions& options = {});
// Each returns the array's new flow.
DISTFLOW_EXPORT Output TensorArrayWrite(const Scope& s, const Output& handle, const Output& index, const Output& value,
                                        const Output& flow);
DISTFLOW_EXPORT Output TensorArrayScatter(const Scope& s, const Output& handle, const Output& indices,
                                          const Output& value, const Output& flow);
// Row i of `value` to index i.
DISTFLOW_EXPORT Output TensorArrayUnstack(const Scope& s, const Output& handle, const Output& value,
                                          const Output& flow);
// Rows [l0, l0+l1, ...) of `value` to indices 0, 1, ... (`lengths` int64; they may differ).
DISTFLOW_EXPORT Output TensorArraySplit(const Scope& s, const Output& handle, const Output& value,
                                        const Output& lengths, const Output& flow);

DISTFLOW_EXPORT Output TensorArrayRead(const Scope& s, const Output& handle, const Output& index, const Output& flow,
                                       DataType dtype, const PartialShape& element_shape = PartialShape::Unknown());
DISTFLOW_EXPORT Output TensorArrayGather(const Scope& s, const Output& handle, const Output& indices,
                                         const Output& flow, DataType dtype,
                                         const PartialShape& element_shape = PartialShape::Unknown());
// Every element, stacked (they must share one shape).
DISTFLOW_EXPORT Output TensorArrayStack(const Scope& s, const Output& handle, const Output& flow, DataType dtype,
                                        const PartialShape& element_shape = PartialShape::Unknown());
// Every element joined along dimension 0, and each one's length (int64).
DISTFLOW_EXPORT std::pair<Output, Output> TensorArrayConcat(const Scope& s, const Output& handle, const Output& flow,
                                                            DataType dtype);
DISTFLOW_EXPORT Output TensorArraySize(const Scope& s, const Output& handle, const Output& flow);
// The gradient array of `handle` for gradient computation `source`: its handle and flow.
DISTFLOW_EXPORT TensorArrayOutput TensorArrayGrad(const Scope& s, const Output& handle, const Output& flow,
                                                  const std::string& source);

}  // namespace ops
}  // namespace distflow
