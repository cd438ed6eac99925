// ops::Cond: TensorFlow's Switch/Merge form of a conditional.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/control_flow_internal.h"
#include "distflow/control_flow.h"

namespace distflow {
namespace ops {

using cf::Fail;
using cf::Op;
using cf::ScopeName;

absl::StatusOr<std::vector<Output>> Cond(const Scope& scope, const Output& pred, const std::vector<Output>& inputs,
                                         const BranchFn& true_fn, const BranchFn& false_fn) {
  RETURN_IF_ERROR(scope.status());
  Scope s = scope.NewSubScope("cond");
  const std::string name = ScopeName(s);
  if (pred.dtype() != DT_BOOL) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("Cond '", name, "': pred '", pred.name(), "' is ",
                                                           DataTypeName(pred.dtype()), ", not bool")));
  }
  // Each branch sees its side of a Switch of every input, and runs after its
  // pivot (the pred's own Switch), so it is dead when not taken.
  Output pred_switch = Op(s.WithOpName("switch_pred"), "Switch", {pred, pred});
  std::vector<Operation> switches;
  for (const Output& x : inputs) switches.push_back(Raw(s, "Switch", {x, pred}));
  std::vector<std::vector<Output>> outs(2);
  for (int branch : {0, 1}) {
    Scope b = s.NewSubScope(branch == 1 ? "true" : "false");
    Output pivot = Op(b.WithOpName("pivot"), "Identity", {Output(pred_switch.op(), branch, b)});
    Scope inside = b.WithControlDependencies({pivot.op()});
    std::vector<Output> in;
    for (const Operation& sw : switches) in.push_back(Output(sw, branch, inside));
    absl::StatusOr<std::vector<Output>> r = (branch == 1 ? true_fn : false_fn)(inside, in);
    if (!r.ok()) return Fail(s, r.status());
    RETURN_IF_ERROR(scope.status());
    // An output the branch passed through from outside is made the branch's own.
    for (const Output& o : *r) outs[static_cast<size_t>(branch)].push_back(Op(inside, "Identity", {o}));
  }
  if (outs[0].size() != outs[1].size()) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("Cond '", name, "': the true branch returns ",
                                                           outs[1].size(), " outputs and the false branch ",
                                                           outs[0].size(), "; both must return the same structure")));
  }
  std::vector<Output> result;
  for (size_t i = 0; i < outs[0].size(); ++i) {
    if (outs[0][i].dtype() != outs[1][i].dtype()) {
      return Fail(s, absl::InvalidArgumentError(absl::StrCat(
                         "Cond '", name, "': output ", i, " is ", DataTypeName(outs[1][i].dtype()),
                         " in the true branch and ", DataTypeName(outs[0][i].dtype()), " in the false branch")));
    }
    result.push_back(Op(s.WithOpName(i == 0 ? "merge" : absl::StrCat("merge_", i)), "Merge", {outs[0][i], outs[1][i]}));
  }
  RETURN_IF_ERROR(scope.status());
  return result;
}

}  // namespace ops
}  // namespace distflow
