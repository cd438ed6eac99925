#include "distflow/control_flow.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
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

// Keeps a loop on GraphState::loops_in_construction while its condition and
// body are built, whichever way WhileLoop returns (a Python body may throw).
class LoopConstructionGuard {
 public:
  LoopConstructionGuard(std::shared_ptr<GraphState> g, std::shared_ptr<GraphState::LoopInConstruction> loop)
      : g_(std::move(g)), loop_(std::move(loop)) {
    absl::MutexLock lock(&g_->mu);
    g_->loops_in_construction.push_back(loop_);
  }
  ~LoopConstructionGuard() { Pop(); }
  void Pop() {
    if (loop_ == nullptr) return;
    absl::MutexLock lock(&g_->mu);
    auto& v = g_->loops_in_construction;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (*it == loop_) {
        v.erase(it);
        break;
      }
    }
    loop_ = nullptr;
  }

 private:
  std::shared_ptr<GraphState> g_;
  std::shared_ptr<GraphState::LoopInConstruction> loop_;
};

Output Enter(const Scope& s, const Output& x, const std::string& frame, bool constant, int parallel,
             const PartialShape* invariant) {
  return Op(s, "Enter", {x}, [&](proto::NodeDef* n) {
    SetAttrString(n, "frame_name", frame);
    SetAttrBool(n, "is_constant", constant);
    SetAttrInt(n, "parallel_iterations", parallel);
    if (invariant != nullptr) SetAttrShape(n, "_shape_invariant", *invariant);
  });
}

struct SavedRandoms {
  std::vector<NodeOut> handles, flows;
  std::vector<PartialShape> shapes;
};

// For each random op the body made (LoopInConstruction::random_ops): a
// TensorArray outside the loop, entered into it, that the body writes the
// op's value to at index `count` (the iteration). Returns the writes.
std::vector<Operation> SaveRandomValues(const Scope& s, const Scope& body, const GraphState::LoopInConstruction& loop,
                                        const std::string& frame, int parallel, const Output& count,
                                        SavedRandoms* saved) {
  std::vector<const Node*> randoms;
  {
    absl::MutexLock lock(&s.graph_state()->mu);
    randoms = loop.random_ops;
  }
  std::vector<Operation> writes;
  for (const Node* r : randoms) {
    // A Dropout's draw is its mask (output 1).
    Output value(Operation(r, s.graph_state()), r->op() == "Dropout" ? 1 : 0, body);
    const PartialShape shape = value.shape();
    Operation ta = Raw(s.WithNoControlDependencies(), "TensorArrayV3", {Const(s.WithNoControlDependencies(), 0)},
                       [&](proto::NodeDef* n) {
                         SetAttrType(n, "dtype", value.dtype());
                         SetAttrBool(n, "dynamic_size", true);
                         SetAttrShape(n, "element_shape", shape);
                       });
    Output handle(ta, 0, s), flow(ta, 1, s);
    Output h = Enter(s, handle, frame, true, parallel, nullptr);
    Output f = Enter(s, flow, frame, true, parallel, nullptr);
    writes.push_back(Raw(body, "TensorArrayWriteV3", {h, count, value, f}));
    saved->handles.push_back(NodeOut{handle.node(), 0});
    saved->flows.push_back(NodeOut{flow.node(), 1});
    saved->shapes.push_back(shape);
  }
  return writes;
}

}  // namespace

absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& scope, const std::vector<Output>& loop_vars,
                                              const LoopCondFn& cond, const LoopBodyFn& body,
                                              const WhileOptions& options) {
  if (!scope.ok()) return scope.status();
  Scope s = scope.NewSubScope(options.name.empty() ? "while" : options.name);
  const std::string name = ScopeName(s);
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size()) {
    return Fail(
        s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': ", options.shape_invariants.size(),
                                                   " shape invariants for ", loop_vars.size(), " loop variables")));
  }
  if (options.parallel_iterations < 1) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name,
                                                           "': parallel_iterations must be at "
                                                           "least 1, got ",
                                                           options.parallel_iterations)));
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
  const size_t num_user = loop_vars.size();
  // With back_prop: a history per loop variable ([0, ...] at first, one row
  // appended per iteration) and an iteration count, after the user's.
  // A variable of unknown rank cannot be stacked: such a loop keeps no
  // history, and Gradients through it is an error naming its Exit.
  bool record = options.back_prop;
  for (size_t i = 0; i < num_user; ++i) {
    const PartialShape shape = options.shape_invariants.empty() ? loop_vars[i].shape() : options.shape_invariants[i];
    if (shape.unknown_rank()) record = false;
  }
  // A variable whose shape changes from one iteration to the next keeps a
  // history of its shapes ([0, rank] int32 at first); its values cannot be
  // stacked.
  auto varying = [&](size_t i) { return i < options.shape_varies.size() && options.shape_varies[i]; };
  if (record) {
    for (size_t i = 0; i < num_user; ++i) {
      const PartialShape shape = options.shape_invariants.empty() ? loop_vars[i].shape() : options.shape_invariants[i];
      if (varying(i)) {
        vars.push_back(Const(s, Tensor(DT_INT32, TensorShape({0, static_cast<int64_t>(shape.rank())}))));
        if (!invariants.empty()) invariants.push_back(PartialShape({-1, static_cast<int64_t>(shape.rank())}));
        continue;
      }
      Output row = Op(s, "ExpandDims", {loop_vars[i], Const(s, 0)});
      std::vector<int64_t> begin(static_cast<size_t>(shape.rank()) + 1, 0), size(begin.size(), -1);
      size[0] = 0;
      vars.push_back(Slice(s, row, begin, size));
      if (!invariants.empty()) {
        PartialShape h({-1});
        for (int64_t d : shape.dims()) h.AppendDim(d);
        invariants.push_back(h);
      }
    }
    vars.push_back(Const(s.WithOpName("iteration_count"), 0));
    if (!invariants.empty()) invariants.push_back(PartialShape({}));
  }
  if (record && invariants.empty()) {
    // The histories grow: they need invariants, and so then does every variable.
    const size_t hist_start = static_cast<size_t>(first) + num_user;
    for (size_t i = 0; i < vars.size(); ++i) {
      PartialShape sh = vars[i].shape();
      if (i >= hist_start && i < hist_start + num_user) {
        const PartialShape var_shape = loop_vars[i - hist_start].shape();
        sh = PartialShape({-1});
        if (varying(i - hist_start)) {
          sh.AppendDim(var_shape.rank());
        } else {
          for (int64_t d : var_shape.dims()) sh.AppendDim(d);
        }
      }
      invariants.push_back(sh);
    }
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
  // Tensors the condition and body capture (CaptureIntoLoop) while they are built.
  auto building = std::make_shared<GraphState::LoopInConstruction>(s);
  building->frame = frame;
  building->parallel_iterations = parallel;
  LoopConstructionGuard guard(s.graph_state(), building);

  auto user = [&](const std::vector<Output>& all) {
    std::vector<Output> v(all.begin() + first, all.begin() + first + static_cast<long>(num_user));
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
  std::vector<bool> zeros_for(num_user, false), no_history(num_user, false);
  SavedRandoms saved;
  if (record) {
    for (size_t i = 0; i < num_user; ++i) {
      const Output& history = body_in[static_cast<size_t>(first) + num_user + i];
      const bool shape_only = options.history_not_needed && options.history_not_needed(static_cast<int>(i));
      if (varying(i)) {
        const Output& value = body_in[static_cast<size_t>(first) + i];
        if (shape_only) {
          zeros_for[i] = true;  // rebuilt on zeros of each iteration's shape
          Output row = Op(body_scope, "ExpandDims", {Op(body_scope, "Shape", {value}), Const(body_scope, 0)});
          next->push_back(Concat(body_scope, {history, row}, 0));
        } else {
          no_history[i] = true;  // its values are needed and cannot be stacked
          next->push_back(Op(body_scope, "Identity", {history}));
        }
        continue;
      }
      if (shape_only) {
        zeros_for[i] = true;  // the history stays empty
        next->push_back(Op(body_scope, "Identity", {history}));
        continue;
      }
      const Output& value = body_in[static_cast<size_t>(first) + i];
      Output row = Op(body_scope, "ExpandDims", {value, Const(body_scope, 0)});
      next->push_back(Concat(body_scope, {history, row}, 0));
    }
    // The body's random ops write each iteration's values to arrays for the
    // gradient, before the count moves on (the backward loop starts from it).
    std::vector<Operation> saves = SaveRandomValues(s, body_scope, *building, frame, parallel, body_in.back(), &saved);
    next->push_back(Op(body_scope.WithControlDependencies(saves), "Add", {body_in.back(), Const(body_scope, 1)}));
  }
  absl::Status checked = CheckNextValues(name, merges, *next, !options.shape_invariants.empty(), first);
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
  guard.Pop();
  std::vector<Output> result(exits.begin() + first, exits.begin() + first + static_cast<long>(num_user));
  if (record) {
    auto rec = std::make_shared<WhileLoopRecord>();
    rec->name = name;
    rec->parallel_iterations = parallel;
    rec->body = body;
    rec->zeros_for = zeros_for;
    rec->no_history = no_history;
    for (size_t i = 0; i < num_user; ++i) rec->shape_history.push_back(varying(i));
    for (size_t i = 0; i < num_user; ++i) {
      rec->exits.push_back(result[i].node());
      rec->loop_vars.push_back(NodeOut{loop_vars[i].node(), loop_vars[i].index()});
      rec->var_shapes.push_back(merges[static_cast<size_t>(first) + i].shape());
      const Output& h = exits[static_cast<size_t>(first) + num_user + i];
      rec->histories.push_back(NodeOut{h.node(), h.index()});
    }
    for (const Output& x : options.invariants) rec->invariants.push_back(NodeOut{x.node(), x.index()});
    for (const NodeOut& x : building->outer) rec->invariants.push_back(x);
    rec->count = NodeOut{exits.back().node(), exits.back().index()};
    rec->random_handles = saved.handles;
    rec->random_flows = saved.flows;
    rec->random_shapes = saved.shapes;
    GraphState& g = *s.graph_state();
    absl::MutexLock lock(&g.mu);
    for (const Node* e : rec->exits) g.while_loops[e] = rec;
  }
  return result;
}

absl::StatusOr<Output> CaptureIntoLoop(const Scope& s, const Output& outer) {
  if (!s.ok()) return s.status();
  if (!outer.ok()) return absl::InvalidArgumentError("CaptureIntoLoop: an invalid Output");
  // The loop is the innermost one being built whose name scope holds `s`
  // (its condition's and body's scopes are "<loop>/cond" and "<loop>/body").
  const std::string where = ScopeName(s);
  std::shared_ptr<GraphState::LoopInConstruction> loop;
  {
    GraphState& g = *s.graph_state();
    absl::MutexLock lock(&g.mu);
    for (const auto& l : g.loops_in_construction) {
      if (where == l->frame || absl::StartsWith(where, l->frame + "/")) loop = l;
    }
  }
  if (loop == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("CaptureIntoLoop('", outer.name(), "'): scope '", where,
                                                      "' is not a WhileLoop's condition or body being built"));
  }
  const std::shared_ptr<GraphState>& gs = s.graph_state();
  for (size_t i = 0; i < loop->outer.size(); ++i) {
    if (loop->outer[i].node == outer.node() && loop->outer[i].index == outer.index()) {
      return Output(Operation(loop->entered[i].node, gs), loop->entered[i].index, s);
    }
  }
  Output e = Enter(loop->enter_scope, outer, loop->frame, true, loop->parallel_iterations, nullptr);
  if (!loop->enter_scope.ok()) return loop->enter_scope.status();
  loop->outer.push_back(NodeOut{outer.node(), outer.index()});
  loop->entered.push_back(NodeOut{e.node(), e.index()});
  return e;
}

absl::Status BuildWhileLoopGradient_(const Scope& scope, const WhileLoopRecord& loop,
                                     const std::vector<Output>& exit_grads, std::vector<Output>* var_grads,
                                     std::vector<Output>* invariant_grads);
}  // namespace ops

absl::Status BuildWhileLoopGradient(const Scope& s, const WhileLoopRecord& loop, const std::vector<Output>& exit_grads,
                                    std::vector<Output>* var_grads, std::vector<Output>* invariant_grads) {
  return ops::BuildWhileLoopGradient_(s, loop, exit_grads, var_grads, invariant_grads);
}

namespace ops {

namespace {
bool Differentiable(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }
// Gradients' shapes are often less known than their values' (broadcast
// reductions reshape to dynamic shapes): the backward loop keeps only ranks.
PartialShape Relaxed(const PartialShape& s) { return s.unknown_rank() ? s : PartialShape::UnknownOfRank(s.rank()); }
// The static shape back, where the forward value had one.
Output Restore(const Scope& s, const Output& g, const PartialShape& shape) {
  if (!g.ok() || !shape.IsFullyDefined()) return g;
  return Reshape(s, g, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
}
}  // namespace

absl::Status BuildWhileLoopGradient_(const Scope& scope, const WhileLoopRecord& loop,
                                     const std::vector<Output>& exit_grads, std::vector<Output>* var_grads,
                                     std::vector<Output>* invariant_grads) {
  const std::shared_ptr<GraphState>& gs = scope.graph_state();
  auto out = [&](const NodeOut& o) { return Output(Operation(o.node, gs), o.index, scope); };
  const size_t m = loop.exits.size(), p = loop.invariants.size();
  // Loop variables of the backward loop: k, the variables' gradients, the
  // invariants' sums.
  std::vector<Output> vars{Op(scope, "Sub", {out(loop.count), Const(scope, 1)})};
  std::vector<PartialShape> shapes{PartialShape({})};
  for (size_t i = 0; i < m; ++i) {
    Output exit = Output(Operation(loop.exits[i], gs), 0, scope);
    vars.push_back(exit_grads[i].ok() ? exit_grads[i] : ZerosLike(scope, exit));
    shapes.push_back(Relaxed(loop.var_shapes[i]));
  }
  for (size_t j = 0; j < p; ++j) {
    Output inv = out(loop.invariants[j]);
    if (!Differentiable(inv.dtype())) {  // no gradient to sum (a TensorArray's handle): a placeholder
      vars.push_back(Const(scope, 0));
      shapes.push_back(PartialShape({}));
      continue;
    }
    vars.push_back(ZerosLike(scope, inv));
    shapes.push_back(Relaxed(inv.shape()));
  }
  WhileOptions opts;
  opts.name = "while_grad";
  opts.parallel_iterations = loop.parallel_iterations;
  opts.shape_invariants = shapes;
  opts.back_prop = false;
  for (size_t i = 0; i < m; ++i) {
    if (i < loop.no_history.size() && loop.no_history[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the gradient of WhileLoop '", loop.name, "': loop variable ", i, " ('", loop.exits[i]->name(),
                       "') changes shape from one iteration to the next and the body reads its ",
                       "values, which the loop cannot keep for the gradient (a dynamic_size TensorArray the body ",
                       "reads: give it a fixed size)"));
    }
  }
  // Per variable its history (of values, or of shapes), or (zeros_for without
  // a shape history) its final value, whose shape it has every iteration.
  auto shape_history = [&](size_t i) { return i < loop.shape_history.size() && loop.shape_history[i]; };
  for (size_t i = 0; i < m; ++i) {
    const bool final_value = i < loop.zeros_for.size() && loop.zeros_for[i] && !shape_history(i);
    opts.invariants.push_back(final_value ? Output(Operation(loop.exits[i], gs), 0, scope) : out(loop.histories[i]));
  }
  for (size_t j = 0; j < p; ++j) opts.invariants.push_back(out(loop.invariants[j]));
  const size_t r = loop.random_handles.size();
  for (size_t q = 0; q < r; ++q) opts.invariants.push_back(out(loop.random_handles[q]));
  for (size_t q = 0; q < r; ++q) opts.invariants.push_back(out(loop.random_flows[q]));
  const std::string what = absl::StrCat("the gradient of WhileLoop '", loop.name, "'");
  auto result = WhileLoop(
      scope, vars,
      [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return Greater(s, v[0], Const(s, -1));
      },
      [&](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        const Output& k = v[0];
        std::vector<Output> xs;  // iteration k's loop variables, then the invariants
        for (size_t i = 0; i < m; ++i) {
          const Output& history = v[1 + m + p + i];
          if (shape_history(i)) {  // zeros of iteration k's shape
            Output begin =
                Concat(s, {Reshape(s, k, std::vector<int64_t>{1}), Const(s, Tensor::FromVector<int32_t>({0}))}, 0);
            Output row = Op(s, "Slice", {history, begin, Const(s, Tensor::FromVector<int32_t>({1, -1}))});
            Output shape = Reshape(s, row, std::vector<int64_t>{loop.var_shapes[i].rank()});
            Output zero = Op(s, "Cast", {Const(s, 0)}, [&](proto::NodeDef* n) {
              SetAttrType(n, "SrcT", DT_INT32);
              SetAttrType(n, "DstT", loop.exits[i]->output_type(0));
            });
            xs.push_back(Op(s, "Fill", {shape, zero}));
            continue;
          }
          if (i < loop.zeros_for.size() && loop.zeros_for[i]) {
            xs.push_back(ZerosLike(s, history));  // `history` is the final value here
            continue;
          }
          const int rank = loop.var_shapes[i].rank();
          Output begin = Reshape(s, k, std::vector<int64_t>{1});
          if (rank > 0) {
            begin = Concat(
                s, {begin, Const(s, Tensor::FromVector<int32_t>(std::vector<int32_t>(static_cast<size_t>(rank), 0)))},
                0);
          }
          std::vector<int32_t> size(static_cast<size_t>(rank) + 1, -1);
          size[0] = 1;
          Output row = Op(s, "Slice", {history, begin, Const(s, Tensor::FromVector<int32_t>(size))});
          Output x = Unpack(s, row, 1, 0)[0];
          if (loop.var_shapes[i].IsFullyDefined()) {
            x = Reshape(s, x, std::vector<int64_t>(loop.var_shapes[i].dims().begin(), loop.var_shapes[i].dims().end()));
          }
          xs.push_back(x);
        }
        for (size_t j = 0; j < p; ++j) xs.push_back(v[1 + m + p + m + j]);
        // The forward's random values of iteration k replace the rebuilt
        // body's draws (GraphState::RandomReplay).
        auto replay = std::make_shared<GraphState::RandomReplay>();
        const std::string body_name = ScopeName(s);
        replay->frame = body_name.substr(0, body_name.rfind('/'));
        for (size_t q = 0; q < r; ++q) {
          const size_t base = 1 + m + p + m + p;
          Output value = Op(s, "TensorArrayReadV3", {v[base + q], k, v[base + r + q]}, [&](proto::NodeDef* n) {
            SetAttrType(n, "dtype", GetAttrType(loop.random_handles[q].node->def(), "dtype").value_or(DT_FLOAT));
            SetAttrShape(n, "element_shape", loop.random_shapes[q]);
          });
          replay->values.push_back(NodeOut{value.node(), 0});
        }
        {
          absl::MutexLock lock(&gs->mu);
          gs->random_replays.push_back(replay);
        }
        absl::StatusOr<std::vector<Output>> rebuilt = loop.body(s, xs);
        {
          absl::MutexLock lock(&gs->mu);
          gs->random_replays.pop_back();
        }
        ASSIGN_OR_RETURN(std::vector<Output> ys, std::move(rebuilt));
        if (ys.size() != m)
          return absl::InternalError(absl::StrCat(what, ": the body returned ", ys.size(), " values"));
        std::vector<Output> dys, gys, dxs;
        for (size_t i = 0; i < m; ++i) {
          if (!Differentiable(ys[i].dtype())) continue;
          dys.push_back(ys[i]);
          gys.push_back(v[1 + i]);
        }
        for (const Output& x : xs) {
          if (Differentiable(x.dtype())) dxs.push_back(x);
        }
        std::vector<Output> grads;
        if (!dys.empty() && !dxs.empty()) {
          GradientOptions go;
          go.keep_control_dependencies = true;
          ASSIGN_OR_RETURN(std::vector<Output> g, Gradients(s, dys, dxs, gys, go));
          grads = std::move(g);
        }
        std::vector<Output> next{Op(s, "Sub", {k, Const(s, 1)})};
        size_t gi = 0;
        for (size_t i = 0; i < m + p; ++i) {
          const Output& x = xs[i];
          const Output& carried = v[1 + i];
          if (!Differentiable(x.dtype())) {
            next.push_back(Op(s, "Identity", {carried}));
            continue;
          }
          Output g = grads.empty() ? Output() : grads[gi];
          ++gi;
          if (i < m) {
            next.push_back(g.ok() ? g : ZerosLike(s, x));
          } else {
            next.push_back(g.ok() ? Op(s, "Add", {carried, g}) : Op(s, "Identity", {carried}));
          }
        }
        return next;
      },
      opts);
  if (!result.ok()) {
    return absl::Status(result.status().code(), absl::StrCat(what, ": ", result.status().message()));
  }
  var_grads->clear();
  invariant_grads->clear();
  for (size_t i = 0; i < m; ++i) {
    var_grads->push_back(Differentiable(loop.exits[i]->output_type(0))
                             ? Restore(scope, (*result)[1 + i], loop.var_shapes[i])
                             : Output());
  }
  for (size_t j = 0; j < p; ++j) {
    const Output& g = (*result)[1 + m + j];
    invariant_grads->push_back(Differentiable(g.dtype()) ? Restore(scope, g, out(loop.invariants[j]).shape())
                                                         : Output());
  }
  return scope.status();
}

}  // namespace ops
}  // namespace distflow
