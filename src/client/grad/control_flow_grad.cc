// Gradients of a conditional (TensorFlow's control_flow_grad.py for a cond):
// Switch and Merge swap. A Merge's gradient is switched back to the input
// that fired (by its value_index), and a Switch's gradient merges the two
// branches' gradients, with zeros standing in for a branch that has none, so
// the gradient reaching the Switch's input is live whichever branch ran. A
// loop made by ops::WhileLoop gets its gradient whole (gradients.cc,
// while_loop_record.h); the loop ops of other loops have none, and Gradients
// names them as an error.
#include "client/grad/grad_families.h"
#include "graph/graph.h"

namespace distflow {
namespace {

using grad::Input;
using grad::Out;
using Grads = std::vector<Output>;

absl::Status SwitchGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  Output data = Input(s, op, 0), pred = Input(s, op, 1);
  Grads branch(2);
  Operation gate;  // the forward Switch again, for zeros on a branch without a gradient
  for (int b : {0, 1}) {
    if (g[static_cast<size_t>(b)].ok()) {
      branch[static_cast<size_t>(b)] = g[static_cast<size_t>(b)];
      continue;
    }
    if (!gate.ok()) gate = ops::Raw(s, "Switch", {data, pred});
    branch[static_cast<size_t>(b)] = ops::ZerosLike(s, Out(s, gate, b));
  }
  *out = {Out(s, ops::Raw(s, "Merge", {branch[0], branch[1]})), Output()};
  return s.status();
}

absl::Status MergeGrad(const Scope& s, const Operation& op, const Grads& g, Grads* out) {
  const int n = op.node()->num_inputs();
  if (!g[0].ok()) {
    out->assign(static_cast<size_t>(n), Output());
    return s.status();
  }
  Output value_index = Out(s, op, 1);
  for (int i = 0; i < n; ++i) {
    Output took_i = ops::Equal(s, value_index, ops::Const(s, i));
    out->push_back(Out(s, ops::Raw(s, "Switch", {g[0], took_i}), 1));
  }
  return s.status();
}

}  // namespace

void RegisterControlFlowGradients(GradientRegistry* r) {
  r->Register("Switch", SwitchGrad);
  r->Register("Merge", MergeGrad);
  r->RegisterNoGradient("LoopCond");
  r->RegisterNoGradient("ControlTrigger");
}

}  // namespace distflow
