#include "distflow/gradients.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/grad/grad_families.h"
#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {

GradientRegistry* GradientRegistry::Global() {
  static GradientRegistry* r = [] {
    auto* reg = new GradientRegistry;
    RegisterStandardGradients(reg);
    return reg;
  }();
  return r;
}

void GradientRegistry::Register(const std::string& op, GradFunc fn) {
  absl::MutexLock lock(&mu_);
  funcs_[op] = std::move(fn);
}

void GradientRegistry::RegisterNoGradient(const std::string& op) {
  absl::MutexLock lock(&mu_);
  no_grad_[op] = true;
}

const GradFunc* GradientRegistry::Find(const std::string& op, bool* no_gradient) const {
  absl::MutexLock lock(&mu_);
  *no_gradient = no_grad_.count(op) > 0;
  auto it = funcs_.find(op);
  return it == funcs_.end() ? nullptr : &it->second;
}

void RegisterStandardGradients(GradientRegistry* r) {
  RegisterMathGradients(r);
  RegisterMathUnaryGradients(r);
  RegisterArrayGradients(r);
  RegisterSliceGradients(r);
  RegisterNnGradients(r);
  RegisterSparseGradients(r);
  RegisterFunctionGradients(r);
  RegisterControlFlowGradients(r);
  RegisterTensorArrayGradients(r);
}

namespace {

using Key = std::pair<int, int>;  // (node id, output index)

bool IsStopGradient(const Node* n) { return n->op() == "StopGradient"; }

// The order gradients flow in, backwards: a topological order of the data
// edges (a loop's back edges, NextIteration -> Merge, left out) in which
// each loop ops::WhileLoop recorded comes as one unit: its initial values and
// captured tensors before all its exits, all its exits before any consumer
// of one. Node ids are not such an order: a tensor a loop body captures may
// be made while the body is built (a variable first created there, at the
// graph's top), after the loop's exits. A graph with another cycle keeps
// the order of ids.
std::vector<int> PropagationOrder(const std::shared_ptr<GraphState>& gs, const std::vector<const Node*>& nodes,
                                  const std::vector<std::vector<std::pair<int, int>>>& consumers) {
  const size_t num = nodes.size();
  std::vector<std::vector<int>> extra(num);  // edges besides the data edges
  {
    absl::flat_hash_map<const WhileLoopRecord*, bool> seen;
    absl::MutexLock lock(&gs->mu);
    for (const auto& [exit, loop] : gs->while_loops) {
      if (!seen.emplace(loop.get(), true).second) continue;
      bool inside = true;
      for (const Node* e : loop->exits) inside = inside && e->id() >= 0 && static_cast<size_t>(e->id()) < num;
      if (!inside) continue;  // made after the snapshot
      std::vector<NodeOut> sources = loop->loop_vars;
      sources.insert(sources.end(), loop->invariants.begin(), loop->invariants.end());
      for (const Node* e : loop->exits) {
        for (const NodeOut& src : sources) {
          if (static_cast<size_t>(src.node->id()) < num) extra[static_cast<size_t>(src.node->id())].push_back(e->id());
        }
        for (const Node* other : loop->exits) {
          for (const auto& [cid, in] : consumers[static_cast<size_t>(other->id())]) {
            extra[static_cast<size_t>(e->id())].push_back(cid);
          }
        }
      }
    }
  }
  auto back_edge = [&](int producer, int consumer) {
    return nodes[static_cast<size_t>(producer)]->op() == "NextIteration" &&
           nodes[static_cast<size_t>(consumer)]->op() == "Merge";
  };
  std::vector<int> pending_inputs(num, 0);
  for (size_t id = 0; id < num; ++id) {
    for (const auto& [cid, in] : consumers[id]) {
      if (!back_edge(static_cast<int>(id), cid)) ++pending_inputs[static_cast<size_t>(cid)];
    }
    for (int to : extra[id]) ++pending_inputs[static_cast<size_t>(to)];
  }
  std::vector<int> order, ready;
  order.reserve(num);
  for (size_t id = num; id-- > 0;) {
    if (pending_inputs[id] == 0) ready.push_back(static_cast<int>(id));
  }
  while (!ready.empty()) {
    const int id = ready.back();
    ready.pop_back();
    order.push_back(id);
    auto done = [&](int to) {
      if (--pending_inputs[static_cast<size_t>(to)] == 0) ready.push_back(to);
    };
    for (const auto& [cid, in] : consumers[static_cast<size_t>(id)]) {
      if (!back_edge(id, cid)) done(cid);
    }
    for (int to : extra[static_cast<size_t>(id)]) done(to);
  }
  if (order.size() != num) {
    order.resize(num);
    for (size_t id = 0; id < num; ++id) order[id] = static_cast<int>(id);
  }
  return order;
}

}  // namespace

absl::StatusOr<std::vector<Output>> Gradients(const Scope& scope, const std::vector<Output>& ys,
                                              const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                              const GradientOptions& options) {
  RETURN_IF_ERROR(scope.status());
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gradients: ", grad_ys.size(), " grad_ys given for ", ys.size(), " ys"));
  }
  const std::shared_ptr<GraphState>& gs = scope.graph_state();
  auto check = [&](const Output& o, const char* what, size_t i) -> absl::Status {
    if (!o.ok()) return absl::InvalidArgumentError(absl::StrCat("Gradients: ", what, "[", i, "] is invalid"));
    if (o.op().graph_state() != gs) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gradients: ", what, "[", i, "] '", o.name(), "' belongs to another graph"));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < ys.size(); ++i) {
    RETURN_IF_ERROR(check(ys[i], "ys", i));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    RETURN_IF_ERROR(check(xs[i], "xs", i));
  }
  for (size_t i = 0; i < grad_ys.size(); ++i) {
    RETURN_IF_ERROR(check(grad_ys[i], "grad_ys", i));
  }

  // Snapshot the graph: nodes by id and their data consumers.
  std::vector<const Node*> nodes;
  std::vector<std::vector<std::pair<int, int>>> consumers;  // (consumer id, input index)
  {
    absl::MutexLock lock(&gs->mu);
    const Graph& g = gs->graph;
    nodes.resize(static_cast<size_t>(g.num_nodes()));
    consumers.resize(nodes.size());
    for (int id = 0; id < g.num_nodes(); ++id) {
      const Node* n = g.node(id);
      nodes[static_cast<size_t>(id)] = n;
      for (int i = 0; i < n->num_inputs(); ++i) {
        consumers[static_cast<size_t>(n->input(i).node->id())].push_back({id, i});
      }
    }
  }
  const size_t num = nodes.size();

  // Forward from xs along differentiable edges (StopGradient ends a path).
  std::vector<bool> fwd(num, false), bwd(num, false);
  std::vector<int> stack;
  {
    // Expand x nodes only through the x outputs themselves.
    std::vector<Key> starts;
    for (const Output& x : xs) starts.push_back({x.node()->id(), x.index()});
    auto visit = [&](int cid) {
      if (!fwd[static_cast<size_t>(cid)]) {
        fwd[static_cast<size_t>(cid)] = true;
        stack.push_back(cid);
      }
    };
    for (const Key& k : starts) {
      if (IsStopGradient(nodes[static_cast<size_t>(k.first)])) continue;
      for (const auto& [cid, in] : consumers[static_cast<size_t>(k.first)]) {
        const Node* c = nodes[static_cast<size_t>(cid)];
        if (c->input(in).index == k.second && grad::IsDifferentiable(c->input_type(in))) visit(cid);
      }
    }
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (IsStopGradient(nodes[static_cast<size_t>(id)])) continue;
      for (const auto& [cid, in] : consumers[static_cast<size_t>(id)]) {
        if (grad::IsDifferentiable(nodes[static_cast<size_t>(cid)]->input_type(in))) visit(cid);
      }
    }
  }
  for (const Output& x : xs) fwd[static_cast<size_t>(x.node()->id())] = true;
  // Backward from ys.
  for (const Output& y : ys) {
    const int id = y.node()->id();
    if (!bwd[static_cast<size_t>(id)]) {
      bwd[static_cast<size_t>(id)] = true;
      stack.push_back(id);
    }
  }
  while (!stack.empty()) {
    const Node* n = nodes[static_cast<size_t>(stack.back())];
    stack.pop_back();
    if (IsStopGradient(n)) continue;
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (!grad::IsDifferentiable(n->input_type(i))) continue;
      const int pid = n->input(i).node->id();
      if (!bwd[static_cast<size_t>(pid)]) {
        bwd[static_cast<size_t>(pid)] = true;
        stack.push_back(pid);
      }
    }
  }
  std::vector<bool> relevant(num, false);
  for (size_t i = 0; i < num; ++i) relevant[i] = fwd[i] && bwd[i];
  const std::vector<int> order = PropagationOrder(gs, nodes, consumers);

  Scope base = (options.keep_control_dependencies ? scope : scope.WithNoControlDependencies()).NewSubScope("gradients");
  auto op_scope = [&](const Node* n, const std::string& suffix) {
    Scope s = base.NewSubScope(n->name() + suffix);
    if (options.colocate_gradients_with_ops) s = s.WithDevice(n->def().device());
    return s;
  };

  std::map<Key, std::vector<Output>> pending;
  for (size_t k = 0; k < ys.size(); ++k) {
    const Output& y = ys[k];
    const Node* n = y.node();
    if (!relevant[static_cast<size_t>(n->id())] || !grad::IsDifferentiable(y.dtype())) continue;
    Output g;
    if (!grad_ys.empty()) {
      g = grad_ys[k];
    } else {
      g = ops::OnesLike(op_scope(n, "_grad_ys"), y);
      if (!g.ok()) return scope.status();
    }
    pending[{n->id(), y.index()}].push_back(g);
  }

  const GradientRegistry* registry = GradientRegistry::Global();
  std::map<Key, Output> summed;
  for (auto step = order.rbegin(); step != order.rend(); ++step) {
    const int id = *step;
    if (!relevant[static_cast<size_t>(id)]) continue;
    const Node* n = nodes[static_cast<size_t>(id)];
    bool has_pending = false;
    for (int o = 0; o < n->num_outputs() && !has_pending; ++o) has_pending = pending.count({id, o}) > 0;
    if (!has_pending) continue;
    Scope s = op_scope(n, "_grad");

    std::vector<Output> grad_outputs(static_cast<size_t>(n->num_outputs()));
    for (int o = 0; o < n->num_outputs(); ++o) {
      auto it = pending.find({id, o});
      if (it == pending.end()) continue;
      Output g = it->second.size() == 1 ? it->second[0] : grad::AggregateGradients(s, it->second);
      if (!g.ok()) return s.status();
      grad_outputs[static_cast<size_t>(o)] = g;
      summed[{id, o}] = g;
      pending.erase(it);
    }
    if (IsStopGradient(n)) continue;

    bool any_input = false;
    for (int i = 0; i < n->num_inputs() && !any_input; ++i) {
      any_input = relevant[static_cast<size_t>(n->input(i).node->id())] && grad::IsDifferentiable(n->input_type(i));
    }
    if (!any_input) continue;  // a source (an x)

    if (n->op() == "Exit") {
      // A loop ops::WhileLoop made: its whole gradient at once, from every
      // exit's (PropagationOrder puts every consumer of every exit after all
      // the exits, so their gradients are complete).
      std::shared_ptr<const WhileLoopRecord> loop;
      {
        absl::MutexLock lock(&gs->mu);
        auto it = gs->while_loops.find(n);
        if (it != gs->while_loops.end()) loop = it->second;
      }
      if (loop != nullptr) {
        std::vector<Output> exit_grads;
        for (const Node* e : loop->exits) {
          if (e == n) {
            exit_grads.push_back(grad_outputs[0]);
            continue;
          }
          auto it = pending.find({e->id(), 0});
          if (it == pending.end()) {
            exit_grads.push_back(Output());
            continue;
          }
          Output g = it->second.size() == 1 ? it->second[0] : ops::AddN(s, it->second);
          summed[{e->id(), 0}] = g;
          pending.erase(it);
          exit_grads.push_back(g);
        }
        std::vector<Output> var_grads, inv_grads;
        RETURN_IF_ERROR(BuildWhileLoopGradient(s, *loop, exit_grads, &var_grads, &inv_grads));
        auto give = [&](const NodeOut& src, const Output& g) {
          if (g.ok() && relevant[static_cast<size_t>(src.node->id())])
            pending[{src.node->id(), src.index}].push_back(g);
        };
        for (size_t i = 0; i < var_grads.size(); ++i) give(loop->loop_vars[i], var_grads[i]);
        for (size_t i = 0; i < inv_grads.size(); ++i) give(loop->invariants[i], inv_grads[i]);
        continue;
      }
    }
    bool no_gradient = false;
    const GradFunc* fn = registry->Find(n->op(), &no_gradient);
    if (no_gradient) continue;
    if (fn == nullptr) {
      const char* why = n->op() == "Exit"
                            ? ": a while loop's gradient needs the iteration history ops::WhileLoop keeps with "
                              "back_prop=true; this loop was built with back_prop=false, or imported from a GraphDef "
                              "(an imported loop has no recorded body yet)"
                            : "";
      return absl::InvalidArgumentError(
          absl::StrCat("No gradient defined for op '", n->op(), "' (node '", n->name(), "')", why));
    }
    std::vector<Output> grad_inputs;
    absl::Status st = (*fn)(s, Operation(n, gs), grad_outputs, &grad_inputs);
    if (!st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat("Gradient of node '", n->name(), "' (op '", n->op(), "'): ", st.message()));
    }
    RETURN_IF_ERROR(s.status());
    if (static_cast<int>(grad_inputs.size()) != n->num_inputs()) {
      return absl::InternalError(absl::StrCat("Gradient function of op '", n->op(), "' returned ", grad_inputs.size(),
                                              " gradients for ", n->num_inputs(), " inputs (node '", n->name(), "')"));
    }
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Output& g = grad_inputs[static_cast<size_t>(i)];
      if (!g.ok()) continue;
      const NodeOut& in = n->input(i);
      if (!relevant[static_cast<size_t>(in.node->id())] || !grad::IsDifferentiable(n->input_type(i))) continue;
      pending[{in.node->id(), in.index}].push_back(g);
    }
  }

  std::vector<Output> result;
  result.reserve(xs.size());
  for (const Output& x : xs) {
    auto it = summed.find({x.node()->id(), x.index()});
    result.push_back(it == summed.end() ? Output() : it->second);
  }
  RETURN_IF_ERROR(scope.status());
  return result;
}

}  // namespace distflow
