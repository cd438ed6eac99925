// The gradient of a loop ops::WhileLoop made with back_prop: a backward loop
// over the iterations in reverse (while_loop_record.h).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/control_flow_internal.h"
#include "distflow/control_flow.h"
#include "distflow/gradients.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace {

using cf::Op;
using cf::ScopeName;

bool Differentiable(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }
// Gradients' shapes are often less known than their values' (broadcast
// reductions reshape to dynamic shapes): the backward loop keeps only ranks.
PartialShape Relaxed(const PartialShape& s) { return s.unknown_rank() ? s : PartialShape::UnknownOfRank(s.rank()); }
// The static shape back, where the forward value had one.
Output Restore(const Scope& s, const Output& g, const PartialShape& shape) {
  if (!g.ok() || !shape.IsFullyDefined()) return g;
  return Reshape(s, g, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
}

absl::Status BuildBackwardLoop(const Scope& scope, const WhileLoopRecord& loop, const std::vector<Output>& exit_grads,
                               std::vector<Output>* var_grads, std::vector<Output>* invariant_grads) {
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
  // The invariants of the backward loop: per variable its saved array's
  // handle and flow (or its final value, for zeros of its shape), the
  // forward's invariants, the random draws' arrays.
  auto shape_history = [&](size_t i) { return i < loop.shape_history.size() && loop.shape_history[i]; };
  auto zeros_for = [&](size_t i) { return i < loop.zeros_for.size() && loop.zeros_for[i]; };
  for (size_t i = 0; i < m; ++i) {
    const SavedValues& h = loop.histories[i];
    if (h.ok()) {
      opts.invariants.push_back(out(h.handle));
      opts.invariants.push_back(out(h.flow));
    } else {
      Output final_value(Operation(loop.exits[i], gs), 0, scope);
      opts.invariants.push_back(final_value);
      opts.invariants.push_back(final_value);
    }
  }
  for (size_t j = 0; j < p; ++j) opts.invariants.push_back(out(loop.invariants[j]));
  const size_t r = loop.randoms.size();
  // (An array not saved: placeholders.)
  auto add_array = [&](const SavedValues& d) {
    opts.invariants.push_back(d.ok() ? out(d.handle) : Const(scope, 0));
    opts.invariants.push_back(d.ok() ? out(d.flow) : Const(scope, 0));
  };
  for (const SavedValues& d : loop.randoms) add_array(d);
  for (const std::vector<SavedValues>& arrays : loop.nested) {
    for (const SavedValues& d : arrays) add_array(d);
  }
  const std::string what = absl::StrCat("the gradient of WhileLoop '", loop.name, "'");
  auto result = WhileLoop(
      scope, vars,
      [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<Output> {
        return Greater(s, v[0], Const(s, -1));
      },
      [&](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        const Output& k = v[0];
        const size_t saved_at = 1 + m + p;  // where the backward loop's invariants start in v
        std::vector<Output> xs;             // iteration k's loop variables, then the invariants
        for (size_t i = 0; i < m; ++i) {
          const Output& handle = v[saved_at + 2 * i];
          const Output& flow = v[saved_at + 2 * i + 1];
          if (shape_history(i)) {  // zeros of iteration k's shape
            Output shape = cf::ReadSaved(s, loop.histories[i], handle, k, flow);
            Output zero = Op(s, "Cast", {Const(s, 0)}, [&](proto::NodeDef* n) {
              SetAttrType(n, "SrcT", DT_INT32);
              SetAttrType(n, "DstT", loop.exits[i]->output_type(0));
            });
            xs.push_back(Op(s, "Fill", {shape, zero}));
            continue;
          }
          if (zeros_for(i)) {
            xs.push_back(ZerosLike(s, handle));  // `handle` is the final value here
            continue;
          }
          Output x = cf::ReadSaved(s, loop.histories[i], handle, k, flow);
          if (loop.var_shapes[i].IsFullyDefined()) {
            x = Reshape(s, x, std::vector<int64_t>(loop.var_shapes[i].dims().begin(), loop.var_shapes[i].dims().end()));
          }
          xs.push_back(x);
        }
        for (size_t j = 0; j < p; ++j) xs.push_back(v[saved_at + 2 * m + j]);
        // The forward's random values of iteration k replace the rebuilt
        // body's draws (GraphState::RandomReplay).
        auto replay = std::make_shared<GraphState::RandomReplay>();
        const std::string body_name = ScopeName(s);
        replay->frame = body_name.substr(0, body_name.rfind('/'));
        replay->index = NodeOut{k.node(), k.index()};
        for (size_t q = 0; q < r; ++q) {
          const size_t at = saved_at + 2 * m + p + 2 * q;
          SavedValues d = loop.randoms[q];
          if (d.ok()) {
            d.handle = NodeOut{v[at].node(), v[at].index()};
            d.flow = NodeOut{v[at + 1].node(), v[at + 1].index()};
          }
          replay->draws.push_back(d);
        }
        size_t at = saved_at + 2 * m + p + 2 * r;
        for (const std::vector<SavedValues>& arrays : loop.nested) {
          replay->nested.emplace_back();
          for (SavedValues d : arrays) {
            if (d.ok()) {
              d.handle = NodeOut{v[at].node(), v[at].index()};
              d.flow = NodeOut{v[at + 1].node(), v[at + 1].index()};
            }
            replay->nested.back().push_back(d);
            at += 2;
          }
        }
        replay->nested_draws = loop.nested_draws;
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

}  // namespace
}  // namespace ops

absl::Status BuildWhileLoopGradient(const Scope& s, const WhileLoopRecord& loop, const std::vector<Output>& exit_grads,
                                    std::vector<Output>* var_grads, std::vector<Output>* invariant_grads) {
  return ops::BuildBackwardLoop(s, loop, exit_grads, var_grads, invariant_grads);
}

}  // namespace distflow
