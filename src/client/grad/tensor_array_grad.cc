// Gradients of the TensorArray ops (TensorFlow's tensor_array_grad.py). Each
// gradient works on the forward array's gradient array (TensorArrayGradV3,
// one per gradient computation: its `source` is the name scope of the
// Gradients call, "gradients" or "scope/gradients_1", the same for the ops a
// while loop's gradient builds inside its backward loop, so every iteration
// reaches one gradient array). What a read or stack gets back is written
// there; what a write or scatter gave is read from there. The flow carries
// the order: a write's gradient reads only after the gradients of every later
// use of the array were written, since it takes the flow they produced.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/grad/grad_families.h"
#include "graph/attr_value.h"
#include "graph/graph.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using Grads = std::vector<Output>;

bool IsGradientsScope(const std::string& part) {
  if (part == "gradients") return true;
  int n = 0;
  return absl::StartsWith(part, "gradients_") && absl::SimpleAtoi(part.substr(10), &n);
}

// The name scope of the Gradients call `s` belongs to.
std::string Source(const Scope& s) {
  std::vector<std::string> parts = absl::StrSplit(s.GetUniqueName("source"), '/');
  for (size_t i = 0; i < parts.size(); ++i) {
    if (IsGradientsScope(parts[i])) {
      parts.resize(i + 1);
      return absl::StrJoin(parts, "/");
    }
  }
  return "gradients";
}

// The gradient array of `op`'s array (input 0); its flow is `flow`.
std::pair<Output, Output> GradArray(const Scope& s, const Operation& op, const Output& flow) {
  const std::string source = Source(s);
  Operation g = ops::Raw(s, "TensorArrayGradV3", {Input(s, op, 0), flow},
                         [&](proto::NodeDef* n) { SetAttrString(n, "source", source); });
  return {Out(s, g, 0), Out(s, g, 1)};
}

DataType ValueType(const Operation& op, int input) { return op.node()->input_type(input); }

// The flow a write-like op's gradient passes on: `g` once `read` (which takes
// the elements out of the gradient array) has run, even when nothing uses
// the gradient it read (a write of a constant), so earlier writes to the
// same index see zeros.
Output After(const Scope& s, const Output& read, const Output& g) {
  return ops::Identity(s.WithControlDependencies({read.op()}), g);
}

PartialShape DropFirst(const PartialShape& p) {
  if (p.unknown_rank() || p.rank() == 0) return PartialShape::Unknown();
  return PartialShape(p.dims().subspan(1));
}

absl::Status WriteGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(4);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, g[0]);
  const Output value = Input(s, op, 2);
  (*out)[2] = Out(s, ops::Raw(s, "TensorArrayReadV3", {handle, Input(s, op, 1), flow}, [&](proto::NodeDef* n) {
                    SetAttrType(n, "dtype", ValueType(op, 2));
                    SetAttrShape(n, "element_shape", value.shape());
                  }));
  (*out)[3] = After(s, (*out)[2], g[0]);
  return s.status();
}

absl::Status ReadGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(3);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, Input(s, op, 2));
  (*out)[2] = Out(s, ops::Raw(s, "TensorArrayWriteV3", {handle, Input(s, op, 1), g[0], flow}));
  return s.status();
}

absl::Status GatherGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(3);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, Input(s, op, 2));
  (*out)[2] = Out(s, ops::Raw(s, "TensorArrayScatterV3", {handle, Input(s, op, 1), g[0], flow}));
  return s.status();
}

absl::Status ScatterGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(4);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, g[0]);
  const Output value = Input(s, op, 2);
  (*out)[2] = Out(s, ops::Raw(s, "TensorArrayGatherV3", {handle, Input(s, op, 1), flow}, [&](proto::NodeDef* n) {
                    SetAttrType(n, "dtype", ValueType(op, 2));
                    SetAttrShape(n, "element_shape", DropFirst(value.shape()));
                  }));
  (*out)[3] = After(s, (*out)[2], g[0]);
  return s.status();
}

absl::Status ConcatGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(2);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, Input(s, op, 1));
  (*out)[1] = Out(s, ops::Raw(s, "TensorArraySplitV3", {handle, g[0], Out(s, op, 1), flow}));
  return s.status();
}

absl::Status SplitGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  *out = Grads(4);
  if (!g[0].ok()) return s.status();
  auto [handle, flow] = GradArray(s, op, g[0]);
  const Output value = Input(s, op, 1);
  (*out)[1] = Out(s, ops::Raw(s, "TensorArrayConcatV3", {handle, flow}, [&](proto::NodeDef* n) {
                    SetAttrType(n, "dtype", ValueType(op, 1));
                    SetAttrShape(n, "element_shape_except0", DropFirst(value.shape()));
                  }));
  (*out)[3] = After(s, (*out)[1], g[0]);
  return s.status();
}

}  // namespace

void RegisterTensorArrayGradients(GradientRegistry* r) {
  r->Register("TensorArrayWriteV3", WriteGrad);
  r->Register("TensorArrayReadV3", ReadGrad);
  r->Register("TensorArrayGatherV3", GatherGrad);
  r->Register("TensorArrayScatterV3", ScatterGrad);
  r->Register("TensorArrayConcatV3", ConcatGrad);
  r->Register("TensorArraySplitV3", SplitGrad);
  r->RegisterNoGradient("TensorArrayV3");
  r->RegisterNoGradient("TensorArrayGradV3");
  r->RegisterNoGradient("TensorArraySizeV3");
  r->RegisterNoGradient("TensorArrayCloseV3");
}

}  // namespace distflow
