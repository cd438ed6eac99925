#include "distflow/train/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "graph/attr_value.h"

namespace distflow {

namespace train_internal {

Output NewVariable(const Scope& scope, const std::string& name, const PartialShape& shape, DataType dtype,
                   const std::function<Output(const Scope&)>& make_initial, bool trainable) {
  Output v = ops::Variable(scope.WithOpName(name).WithNoControlDependencies(), shape, dtype);
  if (!v.ok()) return v;
  // Initializer ops live with their variable, outside any control context.
  Scope init_scope = scope.WithDevice(v.node()->def().device()).WithNoControlDependencies();
  Output initial = make_initial(init_scope.NewSubScope(name + "/Initializer"));
  if (!initial.ok()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("the initial value of variable '", v.op().name(), "' could not be built")));
    return Output();
  }
  Output assign = ops::Assign(init_scope.WithOpName(name + "/Assign"), v, initial);
  if (!assign.ok()) return Output();
  scope.AddInitializer(assign.op());
  if (trainable) scope.AddTrainableVariable(v);
  return v;
}

}  // namespace train_internal

namespace {

bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

// The requested device of the node behind `o`.
const std::string& DeviceOf(const Output& o) { return o.node()->def().device(); }

// The scope for ops colocated with `var`: its device, the caller's control
// dependencies kept.
Scope Colocated(const Scope& scope, const Output& var) { return scope.WithDevice(DeviceOf(var)); }

// Whether `a` runs before `b` in every step (an input of b, transitively).
bool RunsBefore(const Node* a, const Node* b) {
  std::vector<const Node*> stack = {b};
  std::set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == a) return true;
    if (!seen.insert(n).second) continue;
    for (const NodeOut& in : n->inputs()) stack.push_back(in.node);
    for (const Node* c : n->control_inputs()) stack.push_back(c);
  }
  return false;
}

// What an update must wait for so that `gradient` has been computed: its op,
// or, when that op only reshapes or forwards tensors already computed
// (Reshape, Identity, ... of no variable) or is a constant, what it waits
// for (nothing for a constant or a placeholder). Such an op reads no variable, so an update that runs before it changes
// nothing it computes, and every op upstream of it that may read a variable
// is upstream of what is returned. A sharded lookup's gradient values are a
// Reshape on the shard's ps of rows sent by the worker: gating the other
// shards' updates on the worker's op (whose tensor already crosses to them)
// rather than on that Reshape saves a token between the ps tasks each step.
void GateOps(const Node* n, std::set<const Node*>* seen, std::vector<Operation>* out, const Scope& scope) {
  static const std::set<std::string> kForwarding = {"Reshape", "Identity", "ExpandDims", "Squeeze",
                                                    "Concat",  "ConcatV2", "Const",      "Pack"};
  if (!seen->insert(n).second) return;
  // A fed tensor is there when the step starts (and a control edge from a
  // fed placeholder would run the placeholder itself, which fails).
  if (n->op() == "Placeholder") return;
  bool forwards = kForwarding.count(n->op()) != 0 && !n->is_stateful();
  for (int i = 0; forwards && i < n->num_inputs(); ++i) {
    const NodeOut& in = n->input(i);
    // A read of a variable (by value or by reference) must run before the updates.
    if (n->input_is_ref(i) || in.node->output_is_ref(in.index)) forwards = false;
  }
  if (!forwards) {
    out->push_back(Operation(n, scope.graph_state()));
    return;
  }
  for (const NodeOut& in : n->inputs()) GateOps(in.node, seen, out, scope);
  for (const Node* c : n->control_inputs()) GateOps(c, seen, out, scope);
}

absl::Status CheckVariable(const Output& var) {
  if (!var.ok()) return absl::InvalidArgumentError("an invalid variable was passed to the optimizer");
  if (!var.node()->output_is_ref(var.index())) {
    return absl::InvalidArgumentError(absl::StrCat("'", var.name(), "' (", var.node()->op(),
                                                   ") is not a variable reference; optimizers update "
                                                   "variables made by ops::Variable or MakeVariable"));
  }
  if (!IsFloating(var.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", var.name(), "' has dtype ", DataTypeName(var.dtype()),
                                                   "; optimizers train float or double"));
  }
  return absl::OkStatus();
}

}  // namespace

Output Optimizer::Scalar(const Scope& s, double v, DataType dtype) {
  if (dtype == DT_DOUBLE) return ops::Const(s, v);
  return ops::Const(s, static_cast<float>(v));
}

Output Optimizer::LearningRate(const Scope& s, double lr, DataType dtype) const {
  if (!lr_tensor_.ok()) return Scalar(s, lr, dtype);
  if (lr_tensor_.dtype() == dtype) return lr_tensor_;
  return ops::Cast(s.WithOpName("learning_rate"), lr_tensor_, dtype);
}

std::string Optimizer::SlotKey(const Output& var) const { return var.name(); }

Output Optimizer::GetSlot(const Output& var, const std::string& slot) const {
  if (!var.ok()) return Output();
  auto it = slots_.find({var.op().graph_state().get(), SlotKey(var)});
  if (it == slots_.end()) return Output();
  auto s = it->second.find(slot);
  return s == it->second.end() ? Output() : s->second;
}

absl::StatusOr<Output> Optimizer::CreateSlot(const Scope& slot_scope, const Output& var, const std::string& slot,
                                             const std::string& op_name, double value) {
  const PartialShape shape = var.shape();
  if (!shape.IsFullyDefined()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create slot '", slot, "' for variable '", var.name(),
                                                   "' of shape ", shape.DebugString(),
                                                   ": the variable's shape must be fully defined"));
  }
  const DataType dtype = var.dtype();
  std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  Output v = train_internal::NewVariable(
      slot_scope, absl::StrCat(var.op().name(), "/", op_name), shape, dtype,
      [&](const Scope& s) {
        return ops::Fill(s.WithOpName(value == 0 ? "zeros" : "fill"), dims, Scalar(s, value, dtype));
      },
      /*trainable=*/false);
  if (!v.ok()) {
    absl::Status st = slot_scope.status();
    return st.ok() ? absl::InternalError(absl::StrCat("could not create slot '", slot, "' for '", var.name(), "'"))
                   : st;
  }
  slots_[{var.op().graph_state().get(), SlotKey(var)}][slot] = v;
  return v;
}

absl::StatusOr<Optimizer::GradsAndVars> Optimizer::ComputeGradients(const Scope& scope, const Output& loss,
                                                                    const std::vector<Output>& var_list) {
  if (!loss.ok()) return absl::InvalidArgumentError("ComputeGradients: the loss is invalid (an earlier op failed)");
  if (!IsFloating(loss.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("ComputeGradients: the loss '", loss.name(), "' has dtype ",
                                                   DataTypeName(loss.dtype()), "; it must be float or double"));
  }
  std::vector<Output> vars = var_list.empty() ? scope.TrainableVariables() : var_list;
  if (vars.empty()) return absl::InvalidArgumentError("ComputeGradients: no variables to optimize");
  for (const Output& v : vars) {
    RETURN_IF_ERROR(CheckVariable(v));
  }
  ASSIGN_OR_RETURN(std::vector<Output> grads, Gradients(scope, {loss}, vars));
  if (grads.size() != vars.size()) {
    return absl::InternalError(
        absl::StrCat("Gradients returned ", grads.size(), " gradients for ", vars.size(), " variables"));
  }
  GradsAndVars out;
  for (size_t i = 0; i < vars.size(); ++i) out.emplace_back(grads[i], vars[i]);
  return out;
}

absl::StatusOr<Operation> Optimizer::ApplyGradients(const Scope& scope, const GradsAndVars& grads_and_vars,
                                                    const Output* global_step) {
  RETURN_IF_ERROR(scope.status());
  GradsAndVars pairs;
  std::vector<std::string> no_grad;
  for (const auto& [g, v] : grads_and_vars) {
    RETURN_IF_ERROR(CheckVariable(v));
    if (!g.ok()) {
      no_grad.push_back(v.name());
      continue;
    }
    if (g.dtype() != v.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("the gradient '", g.name(), "' has dtype ",
                                                     DataTypeName(g.dtype()), " but variable '", v.name(),
                                                     "' has dtype ", DataTypeName(v.dtype())));
    }
    if (!g.shape().IsCompatibleWith(v.shape())) {
      return absl::InvalidArgumentError(absl::StrCat("the gradient '", g.name(), "' has shape ",
                                                     g.shape().DebugString(), " but variable '", v.name(),
                                                     "' has shape ", v.shape().DebugString()));
    }
    pairs.emplace_back(g, v);
  }
  if (pairs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("No gradients provided for any variable: ", absl::StrJoin(no_grad, ", ")));
  }
  // Slots, once per variable, on the variable's device and outside any
  // control context (so GlobalVariablesInitializer can run them alone).
  for (const auto& [g, v] : pairs) {
    if (slots_.count({v.op().graph_state().get(), SlotKey(v)}) != 0) continue;
    slots_[{v.op().graph_state().get(), SlotKey(v)}];  // mark as done even for slot-less optimizers
    RETURN_IF_ERROR(CreateSlots(Colocated(scope, v).WithNoControlDependencies(), v));
  }
  { RETURN_IF_ERROR(Prepare(scope, pairs.front().second)); }
  RETURN_IF_ERROR(scope.status());

  // Every update waits for every gradient (TensorFlow gates the gradients
  // too, GATE_OP by default). A variable read is a snapshot taken when the
  // reading op runs, and backprop ops read the variables again (a MatMul's
  // input gradient reads its weights): without this gate an update could run
  // before another layer's backprop has read the variable, which then
  // backpropagates through the updated weights (CIFAR-10's convnet diverged).
  // An IndexedSlices gradient is gated on its parts: a control dependency
  // on its dense form would compute that form (a table-sized tensor) each step.
  std::vector<Operation> grad_ops;
  std::set<const Node*> gated;
  for (const auto& [g, v] : pairs) {
    IndexedSlices parts;
    if (AsIndexedSlices(g, &parts)) {
      GateOps(parts.values.node(), &gated, &grad_ops, scope);
      // Indices the values are computed from (a lookup's ids) have run by
      // then: a gate on them too would only add a transfer where they are
      // computed on another device (a sharded lookup's ids, on each shard).
      if (!RunsBefore(parts.indices.node(), parts.values.node()))
        GateOps(parts.indices.node(), &gated, &grad_ops, scope);
    } else {
      GateOps(g.node(), &gated, &grad_ops, scope);
    }
  }
  Scope update_scope = scope.NewSubScope(name()).WithControlDependencies(grad_ops);
  // Sparse updates one by one; dense ones by (requested device, dtype), in
  // the order each group first appears, so an optimizer can fuse a task's.
  std::vector<Operation> updates;
  std::vector<GradsAndVars> dense;
  std::map<std::pair<std::string, DataType>, size_t> group_of;
  for (const auto& [g, v] : pairs) {
    IndexedSlices slices;
    if (!AsIndexedSlices(g, &slices)) {
      auto [it, fresh] = group_of.try_emplace({DeviceOf(v), v.dtype()}, dense.size());
      if (fresh) dense.emplace_back();
      dense[it->second].emplace_back(g, v);
      continue;
    }
    ASSIGN_OR_RETURN(Operation op, ApplySparse(Colocated(update_scope, v), g, slices, v));
    if (!op.ok()) return scope.ok() ? absl::InternalError("the update op is invalid") : scope.status();
    updates.push_back(op);
  }
  for (const GradsAndVars& group : dense) {
    ASSIGN_OR_RETURN(std::vector<Operation> ops, ApplyDenseGroup(Colocated(update_scope, group.front().second), group));
    for (const Operation& op : ops) {
      if (!op.ok()) return scope.ok() ? absl::InternalError("the update op is invalid") : scope.status();
      updates.push_back(op);
    }
  }
  std::vector<Operation> all = updates;
  ASSIGN_OR_RETURN(std::vector<Operation> finish, Finish(update_scope.WithControlDependencies(updates)));
  all.insert(all.end(), finish.begin(), finish.end());
  if (global_step != nullptr) {
    if (!global_step->ok() || !global_step->node()->output_is_ref(global_step->index())) {
      return absl::InvalidArgumentError("global_step must be a variable reference (see CreateGlobalStep)");
    }
    const DataType dt = global_step->dtype();
    if (dt != DT_INT64 && dt != DT_INT32 && dt != DT_FLOAT && dt != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("global_step '", global_step->name(), "' has dtype ",
                                                     DataTypeName(dt),
                                                     "; it must be int64, int32, float32 or float64"));
    }
    Scope step_scope = Colocated(update_scope, *global_step).WithControlDependencies(all);
    Output one = dt == DT_INT64   ? ops::Const(step_scope, int64_t{1})
                 : dt == DT_INT32 ? ops::Const(step_scope, 1)
                                  : Scalar(step_scope, 1.0, dt);
    Output inc = ops::AssignAdd(step_scope.WithOpName("increment_global_step"), *global_step, one);
    if (!inc.ok()) return scope.status();
    all.push_back(inc.op());
  }
  Operation group = ops::Group(update_scope.WithOpName("update"), all);
  RETURN_IF_ERROR(scope.status());
  return group;
}

absl::StatusOr<std::vector<Operation>> Optimizer::ApplyDenseGroup(const Scope& scope, const GradsAndVars& pairs) {
  std::vector<Operation> ops;
  for (const auto& [g, v] : pairs) {
    ASSIGN_OR_RETURN(Operation op, ApplyDense(Colocated(scope, v), g, v));
    ops.push_back(op);
  }
  return ops;
}

absl::StatusOr<Operation> Optimizer::Minimize(const Scope& scope, const Output& loss, const Output* global_step,
                                              const std::vector<Output>& var_list) {
  ASSIGN_OR_RETURN(GradsAndVars gv, ComputeGradients(scope, loss, var_list));
  std::vector<std::string> names;
  bool any = false;
  for (const auto& [g, v] : gv) {
    any |= g.ok();
    names.push_back(v.name());
  }
  if (!any) {
    return absl::InvalidArgumentError(absl::StrCat("No gradients provided for any variable, check that the loss '",
                                                   loss.name(), "' depends on them: ", absl::StrJoin(names, ", ")));
  }
  return ApplyGradients(scope, gv, global_step);
}

// ---------------------------------------------------------------------------

absl::StatusOr<Operation> GradientDescentOptimizer::ApplyDense(const Scope& scope, const Output& grad,
                                                               const Output& var) {
  return ops::Raw(scope, "ApplyGradientDescent", {var, LearningRate(scope, lr_, var.dtype()), grad});
}

absl::StatusOr<Operation> GradientDescentOptimizer::ApplySparse(const Scope& scope, const Output& grad,
                                                                const IndexedSlices& slices, const Output& var) {
  Output delta = ops::Mul(scope, slices.values, LearningRate(scope, lr_, var.dtype()));
  Output sub = ops::ScatterSub(scope, var, slices.indices, delta);
  if (!sub.ok()) return scope.status();
  return sub.op();
}

absl::Status MomentumOptimizer::CreateSlots(const Scope& slot_scope, const Output& var) {
  return CreateSlot(slot_scope, var, "momentum", name(), 0.0).status();
}

absl::StatusOr<Operation> MomentumOptimizer::ApplyDense(const Scope& scope, const Output& grad, const Output& var) {
  const DataType dt = var.dtype();
  return ops::Raw(scope, "ApplyMomentum",
                  {var, GetSlot(var, "momentum"), LearningRate(scope, lr_, dt), grad, Scalar(scope, momentum_, dt)},
                  [this](proto::NodeDef* n) { SetAttrBool(n, "use_nesterov", nesterov_); });
}

absl::StatusOr<Operation> MomentumOptimizer::ApplySparse(const Scope& scope, const Output& grad,
                                                         const IndexedSlices& slices, const Output& var) {
  const DataType dt = var.dtype();
  return ops::Raw(scope, "SparseApplyMomentum",
                  {var, GetSlot(var, "momentum"), LearningRate(scope, lr_, dt), slices.values, slices.indices,
                   Scalar(scope, momentum_, dt)},
                  [this](proto::NodeDef* n) { SetAttrBool(n, "use_nesterov", nesterov_); });
}

absl::Status AdagradOptimizer::CreateSlots(const Scope& slot_scope, const Output& var) {
  return CreateSlot(slot_scope, var, "accumulator", name(), initial_).status();
}

absl::StatusOr<Operation> AdagradOptimizer::ApplyDense(const Scope& scope, const Output& grad, const Output& var) {
  return ops::Raw(scope, "ApplyAdagrad",
                  {var, GetSlot(var, "accumulator"), LearningRate(scope, lr_, var.dtype()), grad});
}

absl::StatusOr<Operation> AdagradOptimizer::ApplySparse(const Scope& scope, const Output& grad,
                                                        const IndexedSlices& slices, const Output& var) {
  return ops::Raw(
      scope, "SparseApplyAdagrad",
      {var, GetSlot(var, "accumulator"), LearningRate(scope, lr_, var.dtype()), slices.values, slices.indices});
}

absl::Status RMSPropOptimizer::CreateSlots(const Scope& slot_scope, const Output& var) {
  RETURN_IF_ERROR(CreateSlot(slot_scope, var, "rms", name(), 1.0).status());
  return CreateSlot(slot_scope, var, "momentum", name() + "_1", 0.0).status();
}

absl::StatusOr<Operation> RMSPropOptimizer::ApplyDense(const Scope& scope, const Output& grad, const Output& var) {
  const DataType dt = var.dtype();
  return ops::Raw(scope, "ApplyRMSProp",
                  {var, GetSlot(var, "rms"), GetSlot(var, "momentum"), LearningRate(scope, lr_, dt),
                   Scalar(scope, decay_, dt), Scalar(scope, momentum_, dt), Scalar(scope, epsilon_, dt), grad});
}

absl::Status AdamOptimizer::CreateSlots(const Scope& slot_scope, const Output& var) {
  RETURN_IF_ERROR(CreateSlot(slot_scope, var, "m", name(), 0.0).status());
  return CreateSlot(slot_scope, var, "v", name() + "_1", 0.0).status();
}

absl::Status AdamOptimizer::Prepare(const Scope& scope, const Output& first_var) {
  if (beta1_power_.ok() && beta1_power_.op().graph_state() == scope.graph_state()) return absl::OkStatus();
  // Like TF, the accumulators take the first variable's dtype and device.
  const DataType dt = first_var.dtype();
  Scope s = Colocated(scope, first_var).WithNoControlDependencies();
  auto make = [&](const std::string& var_name, double init) {
    return train_internal::NewVariable(
        s, var_name, PartialShape::Scalar(), dt, [&](const Scope& is) { return Scalar(is, init, dt); },
        /*trainable=*/false);
  };
  // A second Adam in the graph gets beta1_power_1 and beta2_power_1, as in TF.
  std::string suffix;
  for (int k = 1; s.FindOperation("beta1_power" + suffix).ok() || s.FindOperation("beta2_power" + suffix).ok(); ++k) {
    suffix = absl::StrCat("_", k);
  }
  beta1_power_ = make("beta1_power" + suffix, beta1_);
  beta2_power_ = make("beta2_power" + suffix, beta2_);
  if (!beta1_power_.ok() || !beta2_power_.ok()) {
    return scope.ok() ? absl::InternalError("could not create Adam's beta accumulators") : scope.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<Operation> AdamOptimizer::ApplyDense(const Scope& scope, const Output& grad, const Output& var) {
  const DataType dt = var.dtype();
  Output b1p = beta1_power_, b2p = beta2_power_;
  if (b1p.dtype() != dt) {
    b1p = ops::Cast(scope, b1p, dt);
    b2p = ops::Cast(scope, b2p, dt);
  }
  return ops::Raw(scope, "ApplyAdam",
                  {var, GetSlot(var, "m"), GetSlot(var, "v"), b1p, b2p, LearningRate(scope, lr_, dt),
                   Scalar(scope, beta1_, dt), Scalar(scope, beta2_, dt), Scalar(scope, epsilon_, dt), grad});
}

absl::StatusOr<std::vector<Operation>> AdamOptimizer::ApplyDenseGroup(const Scope& scope, const GradsAndVars& pairs) {
  if (!fused_ || pairs.size() < 2) return Optimizer::ApplyDenseGroup(scope, pairs);
  const DataType dt = pairs.front().second.dtype();
  Output b1p = beta1_power_, b2p = beta2_power_;
  if (b1p.dtype() != dt) {
    b1p = ops::Cast(scope, b1p, dt);
    b2p = ops::Cast(scope, b2p, dt);
  }
  std::vector<Output> in;
  for (const auto& [g, v] : pairs) in.push_back(v);
  for (const auto& [g, v] : pairs) in.push_back(GetSlot(v, "m"));
  for (const auto& [g, v] : pairs) in.push_back(GetSlot(v, "v"));
  for (const Output& s : {b1p, b2p, LearningRate(scope, lr_, dt), Scalar(scope, beta1_, dt), Scalar(scope, beta2_, dt),
                          Scalar(scope, epsilon_, dt)}) {
    in.push_back(s);
  }
  for (const auto& [g, v] : pairs) in.push_back(g);
  const int64_t n = static_cast<int64_t>(pairs.size());
  Operation op = ops::Raw(scope, "FusedApplyAdam", in, [n](proto::NodeDef* d) { SetAttrInt(d, "N", n); });
  if (!op.ok()) return scope.ok() ? absl::InternalError("could not build FusedApplyAdam") : scope.status();
  return std::vector<Operation>{op};
}

absl::StatusOr<Operation> AdamOptimizer::ApplySparse(const Scope& scope, const Output& grad,
                                                     const IndexedSlices& slices, const Output& var) {
  const DataType dt = var.dtype();
  Output b1p = beta1_power_, b2p = beta2_power_;
  if (b1p.dtype() != dt) {
    b1p = ops::Cast(scope, b1p, dt);
    b2p = ops::Cast(scope, b2p, dt);
  }
  return ops::Raw(
      scope, "SparseApplyAdam",
      {var, GetSlot(var, "m"), GetSlot(var, "v"), b1p, b2p, LearningRate(scope, lr_, dt), Scalar(scope, beta1_, dt),
       Scalar(scope, beta2_, dt), Scalar(scope, epsilon_, dt), slices.values, slices.indices},
      [this](proto::NodeDef* n) { SetAttrBool(n, "lazy", lazy_); });
}

absl::StatusOr<std::vector<Operation>> AdamOptimizer::Finish(const Scope& scope) {
  const DataType dt = beta1_power_.dtype();
  Scope s = Colocated(scope, beta1_power_);
  // "_1" for the accumulators of a graph's second Adam (see Prepare).
  const std::string b1_name = beta1_power_.op().name();
  const std::string suffix = b1_name.substr(b1_name.rfind("beta1_power") + std::string("beta1_power").size());
  Output u1 = ops::Assign(s.WithOpName("update_beta1_power" + suffix), beta1_power_,
                          ops::Mul(s, beta1_power_, Scalar(s, beta1_, dt)));
  Output u2 = ops::Assign(s.WithOpName("update_beta2_power" + suffix), beta2_power_,
                          ops::Mul(s, beta2_power_, Scalar(s, beta2_, dt)));
  if (!u1.ok() || !u2.ok()) return scope.status();
  return std::vector<Operation>{u1.op(), u2.op()};
}

absl::StatusOr<std::unique_ptr<FtrlOptimizer>> FtrlOptimizer::Create(double learning_rate, double learning_rate_power,
                                                                     double initial_accumulator_value,
                                                                     double l1_regularization_strength,
                                                                     double l2_regularization_strength,
                                                                     double l2_shrinkage_regularization_strength) {
  auto bad = [](const char* what, double v, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat("FtrlOptimizer: ", what, " = ", v, " must be ", want));
  };
  if (!(learning_rate > 0)) return bad("learning_rate", learning_rate, "positive");
  if (!(learning_rate_power <= 0)) return bad("learning_rate_power", learning_rate_power, "<= 0");
  if (!(initial_accumulator_value > 0)) return bad("initial_accumulator_value", initial_accumulator_value, "positive");
  if (!(l1_regularization_strength >= 0)) return bad("l1_regularization_strength", l1_regularization_strength, ">= 0");
  if (!(l2_regularization_strength >= 0)) return bad("l2_regularization_strength", l2_regularization_strength, ">= 0");
  if (!(l2_shrinkage_regularization_strength >= 0)) {
    return bad("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength, ">= 0");
  }
  return std::make_unique<FtrlOptimizer>(learning_rate, learning_rate_power, initial_accumulator_value,
                                         l1_regularization_strength, l2_regularization_strength, "Ftrl",
                                         l2_shrinkage_regularization_strength);
}

absl::Status FtrlOptimizer::CreateSlots(const Scope& slot_scope, const Output& var) {
  RETURN_IF_ERROR(CreateSlot(slot_scope, var, "accum", name(), initial_).status());
  return CreateSlot(slot_scope, var, "linear", name() + "_1", 0.0).status();
}

absl::StatusOr<Operation> FtrlOptimizer::ApplyDense(const Scope& scope, const Output& grad, const Output& var) {
  const DataType dt = var.dtype();
  std::vector<Output> in = {var,
                            GetSlot(var, "accum"),
                            GetSlot(var, "linear"),
                            grad,
                            LearningRate(scope, lr_, dt),
                            Scalar(scope, l1_, dt),
                            Scalar(scope, l2_, dt)};
  if (l2_shrinkage_ > 0) in.push_back(Scalar(scope, l2_shrinkage_, dt));
  in.push_back(Scalar(scope, lr_power_, dt));
  return ops::Raw(scope, l2_shrinkage_ > 0 ? "ApplyFtrlV2" : "ApplyFtrl", in);
}

absl::StatusOr<Operation> FtrlOptimizer::ApplySparse(const Scope& scope, const Output& grad,
                                                     const IndexedSlices& slices, const Output& var) {
  const DataType dt = var.dtype();
  std::vector<Output> in = {var,
                            GetSlot(var, "accum"),
                            GetSlot(var, "linear"),
                            slices.values,
                            slices.indices,
                            LearningRate(scope, lr_, dt),
                            Scalar(scope, l1_, dt),
                            Scalar(scope, l2_, dt)};
  if (l2_shrinkage_ > 0) in.push_back(Scalar(scope, l2_shrinkage_, dt));
  in.push_back(Scalar(scope, lr_power_, dt));
  return ops::Raw(scope, l2_shrinkage_ > 0 ? "SparseApplyFtrlV2" : "SparseApplyFtrl", in);
}

// ---------------------------------------------------------------------------

Output CreateGlobalStep(const Scope& scope) {
  return train_internal::NewVariable(
      scope, "global_step", PartialShape::Scalar(), DT_INT64,
      [](const Scope& s) { return ops::Const(s.WithOpName("zeros"), int64_t{0}); }, /*trainable=*/false);
}

}  // namespace distflow
