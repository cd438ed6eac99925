// The gradient of a Call: a Call of the function's symbolic gradient
// (MakeGradientFunctionDef), on the call's arguments and the upstream
// gradients of its results (zeros for results nothing depends on). The
// client may have put the gradient function in the node's `grad_f` already.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "distflow/function.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

absl::Status CallGrad(const Scope& s, const Operation& op, const std::vector<Output>& g, std::vector<Output>* out) {
  const proto::NodeDef& def = op.node()->def();
  absl::StatusOr<std::string> grad_f = GetAttrString(def, "grad_f");
  std::string gf = grad_f.ok() ? *grad_f : "";
  if (gf.empty()) {
    ASSIGN_OR_RETURN(std::string f, GetAttrString(def, "f"));
    absl::StatusOr<std::string> made = MakeGradientFunctionDef(f);
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("Gradient of '", op.name(), "' (Call): ", made.status().message()));
    }
    gf = *made;
  }
  const int n_in = op.node()->num_inputs();
  std::vector<Output> inputs;
  std::vector<DataType> tin, tout;
  for (int i = 0; i < n_in; ++i) {
    inputs.push_back(grad::Input(s, op, i));
    tin.push_back(op.node()->input_type(i));
    tout.push_back(op.node()->input_type(i));
  }
  for (int i = 0; i < op.node()->num_outputs(); ++i) {
    Output dy = i < static_cast<int>(g.size()) ? g[static_cast<size_t>(i)] : Output();
    if (!dy.ok()) dy = Output(ops::Raw(s, "ZerosLike", {grad::Out(s, op, i)}), 0, s);
    inputs.push_back(dy);
    tin.push_back(op.node()->output_type(i));
  }
  Operation call = ops::Raw(s, "Call", inputs, [&](proto::NodeDef* n) {
    SetAttrTypeList(n, "Tin", tin);
    SetAttrTypeList(n, "Tout", tout);
    SetAttrString(n, "f", gf);
  });
  out->clear();
  for (int i = 0; i < n_in; ++i) {
    out->push_back(grad::IsDifferentiable(tin[static_cast<size_t>(i)]) ? grad::Out(s, call, i) : Output());
  }
  return s.status();
}

}  // namespace

void RegisterFunctionGradients(GradientRegistry* r) { r->Register("Call", CallGrad); }

}  // namespace distflow
