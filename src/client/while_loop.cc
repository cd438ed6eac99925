// ops::WhileLoop and ops::CaptureIntoLoop: TensorFlow's dataflow form of a
// loop (Enter, Merge, LoopCond, Switch, NextIteration, Exit), and with
// back_prop what its gradient needs (while_loop_record.h).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/control_flow_internal.h"
#include "distflow/control_flow.h"

namespace distflow {
namespace ops {

using cf::Enter;
using cf::Fail;
using cf::Op;
using cf::ScopeName;

namespace {

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

// Keeps a RandomReplay on GraphState::random_replays while a body is built.
class ReplayGuard {
 public:
  ReplayGuard(std::shared_ptr<GraphState> g, std::shared_ptr<GraphState::RandomReplay> replay)
      : g_(std::move(g)), replay_(std::move(replay)) {
    if (replay_ == nullptr) return;
    absl::MutexLock lock(&g_->mu);
    g_->random_replays.push_back(replay_);
  }
  ~ReplayGuard() { Pop(); }
  void Pop() {
    if (replay_ == nullptr) return;
    absl::MutexLock lock(&g_->mu);
    auto& v = g_->random_replays;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (*it == replay_) {
        v.erase(it);
        break;
      }
    }
    replay_ = nullptr;
  }

 private:
  std::shared_ptr<GraphState> g_;
  std::shared_ptr<GraphState::RandomReplay> replay_;
};

// A loop (`frame`, being built in `s`) nested in the body of a loop whose
// gradient rebuilds it: the replay of its draws from the arrays the
// forward's loop saved them in that iteration (RandomReplay::nested), or
// nullptr if it is not such a loop. `count`: its iteration count.
std::shared_ptr<GraphState::RandomReplay> NestedReplay(const Scope& s, const std::string& frame, int parallel,
                                                       const Output& count) {
  const std::shared_ptr<GraphState>& gs = s.graph_state();
  std::vector<SavedValues> arrays, draws;
  NodeOut index;
  {
    absl::MutexLock lock(&gs->mu);
    if (gs->random_replays.empty()) return nullptr;
    GraphState::RandomReplay& top = *gs->random_replays.back();
    if (!absl::StartsWith(frame, top.frame + "/") || top.next_nested >= top.nested.size()) return nullptr;
    arrays = top.nested[top.next_nested];
    draws = top.nested_draws[top.next_nested];
    ++top.next_nested;
    index = top.index;
  }
  auto out = [&](const NodeOut& o) { return Output(Operation(o.node, gs), o.index, s); };
  auto replay = std::make_shared<GraphState::RandomReplay>();
  replay->frame = frame;
  replay->index = NodeOut{count.node(), count.index()};
  for (size_t i = 0; i < arrays.size() && i < draws.size(); ++i) {
    if (!arrays[i].ok()) {
      replay->draws.emplace_back();
      continue;
    }
    Output handle = cf::ReadSaved(s, arrays[i], out(arrays[i].handle), out(index), out(arrays[i].flow));
    SavedValues d = draws[i];
    Output h = Enter(s, handle, frame, true, parallel, nullptr);
    Output f = Enter(s, Const(s, 0.0f), frame, true, parallel, nullptr);
    d.handle = NodeOut{h.node(), h.index()};
    d.flow = NodeOut{f.node(), f.index()};
    replay->draws.push_back(d);
  }
  return replay;
}

// A loop that saves its draws, nested in the body of a loop being built:
// that loop saves the arrays' handles (LoopInConstruction::nested_draws).
// Each array is registered with `count`, the loop's iteration count as it
// exits, as its flow: the enclosing loop's save of the handle waits for it,
// so the writes run even when nothing else needs this loop's count.
void RegisterWithEnclosingLoop(GraphState& g, const std::string& name, std::vector<SavedValues> draws,
                               const Output& count) {
  for (SavedValues& d : draws) {
    if (d.ok()) d.flow = NodeOut{count.node(), count.index()};
  }
  absl::MutexLock lock(&g.mu);
  std::shared_ptr<GraphState::LoopInConstruction> enclosing;
  for (const auto& l : g.loops_in_construction) {
    if (absl::StartsWith(name, l->frame + "/body/")) enclosing = l;
  }
  if (enclosing != nullptr) enclosing->nested_draws.push_back(std::move(draws));
}

}  // namespace

absl::StatusOr<std::vector<Output>> WhileLoop(const Scope& scope, const std::vector<Output>& loop_vars,
                                              const LoopCondFn& cond, const LoopBodyFn& body,
                                              const WhileOptions& options) {
  RETURN_IF_ERROR(scope.status());
  Scope s = scope.NewSubScope(options.name.empty() ? "while" : options.name);
  const std::string name = ScopeName(s);
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size()) {
    return Fail(
        s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': ", options.shape_invariants.size(),
                                                   " shape invariants for ", loop_vars.size(), " loop variables")));
  }
  if (options.parallel_iterations < 1) {
    return Fail(
        s, absl::InvalidArgumentError(absl::StrCat(
               "WhileLoop '", name, "': parallel_iterations must be at least 1, got ", options.parallel_iterations)));
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
  // With back_prop: an iteration count after the user's variables; the
  // body writes each iteration's values to arrays (while_loop_record.h).
  // A variable of unknown rank has no zeros to rebuild on: such a loop
  // keeps nothing, and Gradients through it is an error naming its Exit.
  bool record = options.back_prop;
  for (size_t i = 0; i < num_user; ++i) {
    const PartialShape shape = options.shape_invariants.empty() ? loop_vars[i].shape() : options.shape_invariants[i];
    if (shape.unknown_rank()) record = false;
  }
  auto varying = [&](size_t i) { return i < options.shape_varies.size() && options.shape_varies[i]; };
  if (record) {
    vars.push_back(Const(s.WithOpName("iteration_count"), 0));
    if (!invariants.empty()) invariants.push_back(PartialShape({}));
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
  RETURN_IF_ERROR(s.status());
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
  RETURN_IF_ERROR(s.status());
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
  RETURN_IF_ERROR(s.status());
  Scope body_scope = in.NewSubScope("body").WithControlDependencies({body_in[0].op()});
  // Rebuilt in the body of an enclosing loop's gradient: this loop's draws
  // are those the forward's loop drew in that iteration.
  std::shared_ptr<GraphState::RandomReplay> replay =
      record ? NestedReplay(s, frame, parallel, body_in.back()) : nullptr;
  ReplayGuard replaying(s.graph_state(), replay);
  absl::StatusOr<std::vector<Output>> next = body(body_scope, user(body_in));
  replaying.Pop();
  if (!next.ok()) return Fail(s, next.status());
  RETURN_IF_ERROR(s.status());
  if (next->size() != loop_vars.size()) {
    return Fail(s, absl::InvalidArgumentError(absl::StrCat("WhileLoop '", name, "': the body returns ", next->size(),
                                                           " values for ", loop_vars.size(), " loop variables")));
  }
  if (limited) next->insert(next->begin(), Op(body_scope, "Add", {body_in[0], Const(body_scope, 1)}));
  std::vector<bool> zeros_for(num_user, false);
  std::vector<SavedValues> histories(num_user), randoms;
  std::vector<std::vector<SavedValues>> nested, nested_draws;
  if (record) {
    // Each iteration's values (or, for a variable the gradient needs only
    // the shape of, its shapes when they vary), written before the count
    // moves on: the backward loop starts from the count.
    const cf::IterationArrayBuilder saver{s, body_scope, frame, parallel, body_in.back()};
    std::vector<Operation> saves;
    for (size_t i = 0; i < num_user; ++i) {
      const Output& value = body_in[static_cast<size_t>(first) + i];
      const bool shape_only = options.history_not_needed && options.history_not_needed(static_cast<int>(i));
      if (shape_only) {
        zeros_for[i] = true;  // rebuilt on zeros: of each iteration's shape, or of the final value's
        if (varying(i)) {
          Output shape = Op(body_scope, "Shape", {value});
          saves.push_back(cf::SaveEachIteration(saver, shape, PartialShape({value.shape().rank()}), &histories[i]));
        }
        continue;
      }
      saves.push_back(cf::SaveEachIteration(saver, value,
                                            varying(i) ? PartialShape::UnknownOfRank(value.shape().rank())
                                                       : merges[static_cast<size_t>(first) + i].shape(),
                                            &histories[i]));
    }
    // The body's random ops' draws, for the gradient to replay.
    std::vector<Operation> random_saves = cf::SaveRandomValues(saver, *building, &randoms);
    saves.insert(saves.end(), random_saves.begin(), random_saves.end());
    std::vector<Operation> nested_saves = cf::SaveNestedDraws(saver, *building, &nested, &nested_draws);
    saves.insert(saves.end(), nested_saves.begin(), nested_saves.end());
    next->push_back(Op(body_scope.WithControlDependencies(saves), "Add", {body_in.back(), Const(body_scope, 1)}));
  }
  absl::Status checked = CheckNextValues(name, merges, *next, !options.shape_invariants.empty(), first);
  if (!checked.ok()) return Fail(s, checked);
  for (size_t i = 0; i < vars.size(); ++i) {
    Output n = Op(in, "NextIteration", {(*next)[i]});
    RETURN_IF_ERROR(s.status());
    GraphState& g = *s.graph_state();
    absl::Status st;
    {
      absl::MutexLock lock(&g.mu);
      st = g.graph.SetBackEdge(merges[i].node()->name(), 1, NodeOut{n.node(), 0});
    }
    if (!st.ok()) return Fail(s, st);
  }
  guard.Pop();
  if (record) RegisterWithEnclosingLoop(*s.graph_state(), name, randoms, exits.back());
  std::vector<Output> result(exits.begin() + first, exits.begin() + first + static_cast<long>(num_user));
  if (record) {
    auto rec = std::make_shared<WhileLoopRecord>();
    rec->name = name;
    rec->parallel_iterations = parallel;
    rec->body = body;
    rec->zeros_for = zeros_for;
    rec->histories = histories;
    rec->randoms = randoms;
    rec->nested = nested;
    rec->nested_draws = nested_draws;
    for (size_t i = 0; i < num_user; ++i) rec->shape_history.push_back(zeros_for[i] && varying(i));
    for (size_t i = 0; i < num_user; ++i) {
      rec->exits.push_back(result[i].node());
      rec->loop_vars.push_back(NodeOut{loop_vars[i].node(), loop_vars[i].index()});
      rec->var_shapes.push_back(merges[static_cast<size_t>(first) + i].shape());
    }
    for (const Output& x : options.invariants) rec->invariants.push_back(NodeOut{x.node(), x.index()});
    for (const NodeOut& x : building->outer) rec->invariants.push_back(x);
    rec->count = NodeOut{exits.back().node(), exits.back().index()};
    GraphState& g = *s.graph_state();
    absl::MutexLock lock(&g.mu);
    for (const Node* e : rec->exits) g.while_loops[e] = rec;
  }
  return result;
}

absl::StatusOr<Output> CaptureIntoLoop(const Scope& s, const Output& outer) {
  RETURN_IF_ERROR(s.status());
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
  RETURN_IF_ERROR(loop->enter_scope.status());
  loop->outer.push_back(NodeOut{outer.node(), outer.index()});
  loop->entered.push_back(NodeOut{e.node(), e.index()});
  return e;
}

}  // namespace ops
}  // namespace distflow
