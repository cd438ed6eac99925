#include "distflow/function.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "graph/attr_value.h"
#include "proto/function.pb.h"

namespace distflow {

absl::StatusOr<std::string> MakeFunctionDef(const Scope& body, const std::string& name, const std::vector<Output>& args,
                                            const std::vector<Output>& rets) {
  RETURN_IF_ERROR(body.status());
  proto::FunctionDef def;
  def.set_name(name);
  for (const Output& a : args) {
    if (!a.ok() || a.op().graph_state() != body.graph_state() || a.op().op_type() != "Placeholder") {
      return absl::InvalidArgumentError(absl::StrCat("Function '", name, "': argument '",
                                                     a.ok() ? a.name() : "<invalid>",
                                                     "' must be a Placeholder of the function's body"));
    }
    def.add_arg(a.op().name());
    def.add_arg_type(static_cast<proto::DataType>(a.dtype()));
  }
  for (const Output& r : rets) {
    if (!r.ok() || r.op().graph_state() != body.graph_state()) {
      return absl::InvalidArgumentError(absl::StrCat("Function '", name, "': result '", r.ok() ? r.name() : "<invalid>",
                                                     "' must be an output of the function's body"));
    }
    def.add_ret(r.name());
    def.add_ret_type(static_cast<proto::DataType>(r.dtype()));
    r.shape().ToProto(def.add_ret_shape());
  }
  body.ToGraphDef(def.mutable_body());
  return def.SerializeAsString();
}

namespace {

// Adds the nodes of `body` to `s`'s graph under their own names.
absl::Status Import(const Scope& s, const proto::GraphDef& body) {
  for (const proto::NodeDef& node : body.node()) {
    std::vector<Output> inputs;
    std::vector<Operation> deps;
    for (const std::string& in : node.input()) {
      std::string src;
      int index = 0;
      RETURN_IF_ERROR(ParseTensorName(in, &src, &index));
      Operation op = s.FindOperation(src);
      if (!op.ok()) return absl::InvalidArgumentError(absl::StrCat("The body has no node '", src, "'"));
      if (index < 0) {
        deps.push_back(op);
      } else {
        inputs.emplace_back(op, index, s);
      }
    }
    proto::NodeDef def = node;
    def.clear_input();
    Scope at = s.WithFullOpName(node.name());
    if (!deps.empty()) at = at.WithControlDependencies(deps);
    if (!at.AddNode(def, inputs).ok()) return s.status();
  }
  return s.status();
}

}  // namespace

absl::StatusOr<std::string> MakeGradientFunctionDef(const std::string& function_def) {
  proto::FunctionDef f;
  if (!f.ParseFromString(function_def)) return absl::InvalidArgumentError("Not a serialized FunctionDef");
  Scope s = Scope::NewRootScope();
  if (absl::Status st = Import(s, f.body()); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("Gradient of function '", f.name(), "': ", st.message()));
  }
  std::vector<Output> args, rets, dys, ys, xs;
  for (const std::string& a : f.arg()) args.emplace_back(s.FindOperation(a), 0, s);
  for (int i = 0; i < f.ret_size(); ++i) {
    std::string node;
    int index = 0;
    RETURN_IF_ERROR(ParseTensorName(f.ret(i), &node, &index));
    Output y(s.FindOperation(node), index, s);
    rets.push_back(y);
    Output dy = Output(ops::Raw(s.WithOpName(absl::StrCat("_grad_dy_", i)), "Placeholder", {},
                                {{"dtype", y.dtype()}, {"shape", PartialShape()}}),
                       0, s);
    dys.push_back(dy);
    const DataType dt = y.dtype();
    if (dt == DT_FLOAT || dt == DT_DOUBLE) {
      ys.push_back(y);
      xs.push_back(dy);  // reused below as grad_ys
    }
  }
  std::vector<Output> diff_args;
  for (const Output& a : args) {
    if (a.dtype() == DT_FLOAT || a.dtype() == DT_DOUBLE) diff_args.push_back(a);
  }
  std::vector<Output> grads;
  if (!ys.empty() && !diff_args.empty()) {
    DF_ASSIGN_OR_RETURN(grads, Gradients(s, ys, diff_args, xs));
  }
  std::vector<Output> dxs;
  size_t g = 0;
  for (const Output& a : args) {
    const bool diff = a.dtype() == DT_FLOAT || a.dtype() == DT_DOUBLE;
    Output dx = diff && g < grads.size() ? grads[g] : Output();
    if (diff) ++g;
    // No gradient (an argument the results do not use, or not float): zeros.
    if (!dx.ok()) dx = Output(ops::Raw(s, "ZerosLike", {a}), 0, s);
    dxs.push_back(Output(ops::Raw(s, "Identity", {dx}), 0, s));
  }
  RETURN_IF_ERROR(s.status());
  std::vector<Output> grad_args = args;
  grad_args.insert(grad_args.end(), dys.begin(), dys.end());
  return MakeFunctionDef(s, absl::StrCat(f.name(), "_grad"), grad_args, dxs);
}

}  // namespace distflow
