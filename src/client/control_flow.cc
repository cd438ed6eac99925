#include "distflow/control_flow.h"

#include "absl/strings/str_cat.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace {

Output Op(const Scope& s, const std::string& op, const std::vector<Output>& in,
          const std::function<void(proto::NodeDef*)>& attrs = nullptr, int index = 0) {
  return Output(Raw(s, op, in, attrs), index, s.WithOpName(""));
}

// Records `st` in the scope too, so a Session run reports it.
absl::Status Fail(const Scope& s, absl::Status st) {
  s.UpdateStatus(st);
  return st;
}

// The "name" a Cond or loop is known by in errors: its name scope.
std::string ScopeName(const Scope& s) {
  std::string probe = s.GetUniqueName("x");
  size_t slash = probe.rfind('/');
  return slash == std::string::npos ? std::string("") : probe.substr(0, slash);
}

// A body's output may be less specific than the invariant only where the
// invariant leaves a dimension unknown.
bool FitsInvariant(const PartialShape& invariant, const PartialShape& shape) {
  if (invariant.unknown_rank()) return true;
  if (shape.unknown_rank() || shape.rank() != invariant.rank()) return false;
  for (int d = 0; d < shape.rank(); ++d) {
    if (invariant.dim(d) >= 0 && invariant.dim(d) != shape.dim(d)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<Output>> Cond(const Scope& scope, const Output& pred, const std::vector<Output>& inputs,
                                         const BranchFn& true_fn, const BranchFn& false_fn) {
  if (!scope.ok()) return scope.status();
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
    if (!scope.ok()) return scope.status();
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
  if (!scope.ok()) return scope.status();
  return result;
}

namespace {

absl::Status CheckNextValues(const std::string& name, const std::vector<Output>& merges,
                             const std::vector<Output>& next, bool have_invariants, int first_user_var) {
  for (size_t i = 0; i < next.size(); ++i) {
    const int var = static_cast<int>(i) - first_user_var;
    const std::string what = var < 0 ? std::string("its iteration counter")
                                     : absl::StrCat("loop variable ", var, " ('", merges[i].name(), "')");
    if (next[i].dtype() != merges[i].dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': ", what, " is ",
                                                     DataTypeName(merges[i].dtype()), " but the body returns ",
                                                     DataTypeName(next[i].dtype())));
    }
    const PartialShape want = merges[i].shape();
    const PartialShape got = next[i].shape();
    if (!FitsInvariant(want, got)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WhileLoop '", name, "': ", what, " has shape ", want.DebugString(),
          " entering the loop but the body returns shape ", got.DebugString(),
          have_invariants ? "; that does not fit its shape invariant"
                          : "; give it a shape invariant (WhileOptions::shape_invariants) that allows the change"));
    }
  }
  return absl::OkStatus();
}

Output Enter(const Scope& s, const Output& x, const std::string& frame, bool constant, int parallel,
             const PartialShape* invariant) {
  return Op(s, "Enter", {x}, [&](proto::NodeDef* n) {
    SetAttrString(n, "frame_name", frame);
    SetAttrBool(n, "is_constant", constant);
    SetAttrInt(n, "parallel_iterations", parallel);
    if (invariant != nullptr) SetAttrShape(n, "_shape_invariant", *invariant);
  });
}

}  // namespace

absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& scope, const std::vector<Output>& loop_vars,
                                              const LoopCondFn& cond, const LoopBodyFn& body,
                                              const WhileOptions& options) {
  if (!scope.ok()) return scope.status();
  Scope s = scope.NewSubScope(options.name.empty() ? "while" : options.name);
  const std::string name = ScopeName(s);
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size()) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': ", options.shape_invariants.size(),
                                                           " shape invariants for ", loop_vars.size(),
                                                           " loop variables")));
  }
  if (options.parallel_iterations < 1) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': parallel_iterations must be at "
                                                           "least 1, got ", options.parallel_iterations)));
  }
  if (loop_vars.empty()) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': no loop variables")));
  }
  std::vector<Output> vars = loop_vars;
  std::vector<PartialShape> invariants = options.shape_invariants;
  const bool limited = options.maximum_iterations >= 0;
  const int first = limited ? 1 : 0;
  if (limited) {
    vars.insert(vars.begin(), Const(s.WithOpName("iteration_counter"), 0));
    if (!invariants.empty()) invariants.insert(invariants.begin(), PartialShape({}));
  }
  const std::string frame = name;
  const int parallel = options.parallel_iterations;
  // Enters run in the enclosing frame, after the scope's control
  // dependencies; everything else runs in the loop's frame, without them.
  Scope in = s.WithNoControlDependencies();
  std::vector<Output> merges;
  for (size_t i = 0; i < vars.size(); ++i) {
    Output e = Enter(s, vars[i], frame, false, parallel, invariants.empty() ? nullptr : &invariants[i]);
    merges.push_back(Op(in, "Merge", {e, e}));
  }
  std::vector<Output> entered;
  for (const Output& x : options.invariants) entered.push_back(Enter(s, x, frame, true, parallel, nullptr));
  if (!s.ok()) return s.status();

  auto user = [&](const std::vector<Output>& all) {
    std::vector<Output> v(all.begin() + first, all.end());
    v.insert(v.end(), entered.begin(), entered.end());
    return v;
  };
  Scope cond_scope = in.NewSubScope("cond").WithControlDependencies({merges[0].op()});
  absl::StatusOr<Output> c = cond(cond_scope, user(merges));
  if (!c.ok()) return Fail(s, c.status());
  if (!s.ok()) return s.status();
  if (c->dtype() != DT_BOOL || !(c->shape().unknown_rank() || c->shape().rank() == 0)) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': the condition returns ",
                                                           DataTypeName(c->dtype()), " of shape ",
                                                           c->shape().DebugString(), ", not a scalar bool")));
  }
  Output pred = *c;
  if (limited) {
    Output max = Enter(s, Const(s.WithOpName("maximum_iterations"), static_cast<int>(options.maximum_iterations)),
                       frame, true, parallel, nullptr);
    pred = Op(cond_scope, "LogicalAnd", {Op(cond_scope, "Less", {merges[0], max}), pred});
  }
  Output loop_cond = Op(in.WithOpName("LoopCond"), "LoopCond", {pred});
  std::vector<Output> exits, body_in;
  for (size_t i = 0; i < vars.size(); ++i) {
    Operation sw = Raw(in, "Switch", {merges[i], loop_cond});
    exits.push_back(Op(in, "Exit", {Output(sw, 0, in)}));
    body_in.push_back(Op(in, "Identity", {Output(sw, 1, in)}));
  }
  if (!s.ok()) return s.status();
  Scope body_scope = in.NewSubScope("body").WithControlDependencies({body_in[0].op()});
  absl::StatusOr<std::vector<Output>> next = body(body_scope, user(body_in));
  if (!next.ok()) return Fail(s, next.status());
  if (!s.ok()) return s.status();
  if (next->size() != loop_vars.size()) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': the body returns ", next->size(),
                                                           " values for ", loop_vars.size(), " loop variables")));
  }
  if (limited) next->insert(next->begin(), Op(body_scope, "Add", {body_in[0], Const(body_scope, 1)}));
  absl::Status checked = CheckNextValues(name, merges, *next, !invariants.empty(), first);
  if (!checked.ok()) return Fail(s, checked);
  for (size_t i = 0; i < vars.size(); ++i) {
    Output n = Op(in, "NextIteration", {(*next)[i]});
    if (!s.ok()) return s.status();
    GraphState& g = *s.graph_state();
    absl::Status st;
    {
      absl::MutexLock lock(&g.mu);
      st = g.graph.SetBackEdge(merges[i].node()->name(), 1, NodeOut{n.node(), 0});
    }
    if (!st.ok()) return Fail(s, st);
  }
  return std::vector<Output>(exits.begin() + first, exits.end());
}

}  // namespace ops
}  // namespace distflow
