#include "absl/strings/str_cat.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace grad {

bool IsDifferentiable(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }

Output Out(const Scope& s, const Operation& op, int i) { return Output(op, i, s.WithOpName("")); }

Output Input(const Scope& s, const Operation& op, int i) {
  const NodeOut& in = op.node()->input(i);
  return Output(Operation(in.node, op.graph_state()), in.index, s.WithOpName(""));
}

Output ScalarConst(const Scope& s, double v, DataType dt) {
  if (dt == DT_DOUBLE) return ops::Const(s, Tensor::Scalar<double>(v));
  return ops::Const(s, Tensor::Scalar<float>(static_cast<float>(v)));
}

Output BuildLike(const Scope& s, const std::string& op_name, const std::vector<Output>& inputs, const Node* from,
                 const std::function<void(proto::NodeDef*)>& extra, int index) {
  const OpDef* def = OpRegistry::Global()->LookUp(op_name);
  Operation op = ops::Raw(s, op_name, inputs, [&](proto::NodeDef* n) {
    if (def != nullptr && from != nullptr) {
      for (const auto& [name, value] : from->def().attr()) {
        const AttrDef* a = def->FindAttr(name);
        if (a == nullptr || a->kind == "type" || a->kind == "list(type)") continue;
        bool is_number = false;
        for (const ArgDef& arg : def->inputs) is_number |= arg.number_attr == name;
        for (const ArgDef& arg : def->outputs) is_number |= arg.number_attr == name;
        if (is_number) continue;
        (*n->mutable_attr())[name] = value;
      }
    }
    if (extra) extra(n);
  });
  return Out(s, op, index);
}

Output SumAxes(const Scope& s, const Output& x, const Output& axes, bool keep_dims) {
  return Out(s, ops::Raw(s, "Sum", {x, axes}, [&](proto::NodeDef* n) { SetAttrBool(n, "keep_dims", keep_dims); }));
}

std::pair<Output, Output> ReduceForBroadcast(const Scope& s, const Output& x, const Output& y, const Output& gx,
                                             const Output& gy) {
  const PartialShape xs = x.shape(), ys = y.shape();
  if (xs.IsFullyDefined() && ys.IsFullyDefined() && xs == ys) return {gx, gy};
  Output sx = ops::Shape(s, x), sy = ops::Shape(s, y);
  Operation args = ops::Raw(s, "BroadcastGradientArgs", {sx, sy});
  Output rx = Out(s, args, 0), ry = Out(s, args, 1);
  Output out_x, out_y;
  if (gx.ok()) out_x = ops::Reshape(s, SumAxes(s, gx, rx), sx);
  if (gy.ok()) out_y = ops::Reshape(s, SumAxes(s, gy, ry), sy);
  return {out_x, out_y};
}

bool AttrBool(const Node* n, const char* name, bool def) {
  absl::StatusOr<bool> v = GetAttrBool(n->def(), name);
  return v.ok() ? *v : def;
}

}  // namespace grad
}  // namespace distflow
