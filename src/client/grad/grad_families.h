// Private: the gradient families registered by RegisterStandardGradients, and
// helpers the gradient functions share.
#pragma once

#include <string>
#include <vector>

#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/scope.h"

namespace distflow {

void RegisterMathGradients(GradientRegistry* r);
void RegisterMathUnaryGradients(GradientRegistry* r);  // math_unary_grad.cc
void RegisterArrayGradients(GradientRegistry* r);
void RegisterSliceGradients(GradientRegistry* r);  // slice_grad.cc
void RegisterNnGradients(GradientRegistry* r);
void RegisterSparseGradients(GradientRegistry* r);       // sparse_grad.cc
void RegisterFunctionGradients(GradientRegistry* r);     // function_grad.cc: Call
void RegisterControlFlowGradients(GradientRegistry* r);  // control_flow_grad.cc: Switch, Merge
void RegisterTensorArrayGradients(GradientRegistry* r);  // tensor_array_grad.cc: TensorArray*V3

namespace grad {

// Whether gradients flow through tensors of this dtype (float, double).
bool IsDifferentiable(DataType dt);

// Output i of `op`, made in scope `s`.
Output Out(const Scope& s, const Operation& op, int i = 0);
// Data input i of `op` as an Output.
Output Input(const Scope& s, const Operation& op, int i);
// A scalar constant of dtype `dt` (float or double).
Output ScalarConst(const Scope& s, double v, DataType dt);
// Builds `op_name` with `inputs`, copying every attribute of `from` that the
// new op defines (except type attributes, which are inferred), then calling
// `extra` if given.
Output BuildLike(const Scope& s, const std::string& op_name, const std::vector<Output>& inputs, const Node* from,
                 const std::function<void(proto::NodeDef*)>& extra = nullptr, int index = 0);
// Sum over `axes` (an int32/int64 vector Output), no keep_dims.
Output SumAxes(const Scope& s, const Output& x, const Output& axes, bool keep_dims = false);
// Reduces `g` (of the broadcast output's shape) to the shape of `x`: the
// gradient of a broadcasting binary op's input x, given the other input y.
// Returns {gx, gy}.
std::pair<Output, Output> ReduceForBroadcast(const Scope& s, const Output& x, const Output& y, const Output& gx,
                                             const Output& gy);
// The sum of several gradients of one tensor (indexed_slices.cc): sparse
// ones (IndexedSlicesGradient) concatenated into one sparse gradient, up to
// kMaxConcatenatedSlices of them; otherwise AddN of the dense forms.
Output AggregateGradients(const Scope& s, const std::vector<Output>& grads);
// Bool attribute of a node, `def` if absent.
bool AttrBool(const Node* n, const char* name, bool def);

}  // namespace grad
}  // namespace distflow
