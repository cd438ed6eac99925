#include "distflow/train/collective_all_reduce_optimizer.h"

#include <cstdlib>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/graph.h"

namespace distflow {

namespace {

absl::Status CheckOptions(const CollectiveAllReduceOptions& options) {
  if (options.num_replicas < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CollectiveAllReduceOptions::num_replicas must be at least 1 (or 0: the elastic group), got ",
                     options.num_replicas));
  }
  // The elastic group's ranks are decided at run time: any rank will do.
  if (options.num_replicas > 0 && (options.rank < 0 || options.rank >= options.num_replicas)) {
    return absl::InvalidArgumentError(absl::StrCat("CollectiveAllReduceOptions::rank is ", options.rank,
                                                   " but the group has ranks 0..", options.num_replicas - 1));
  }
  if (options.fusion_threshold_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CollectiveAllReduceOptions::fusion_threshold_bytes must be 0 (no fusion) or more, got ",
                     options.fusion_threshold_bytes));
  }
  if (options.fusion_cycle_ms.has_value() && !(*options.fusion_cycle_ms >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CollectiveAllReduceOptions::fusion_cycle_ms must be 0 (graph-time buckets) or more, got ",
                     *options.fusion_cycle_ms));
  }
  if (!options.group_members.empty() && static_cast<int>(options.group_members.size()) != options.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("CollectiveAllReduceOptions::group_members lists ",
                                                   options.group_members.size(), " task(s) but num_replicas is ",
                                                   options.num_replicas));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveAllReduceOptimizer>> CollectiveAllReduceOptimizer::Create(
    std::unique_ptr<Optimizer> optimizer, CollectiveAllReduceOptions options) {
  if (optimizer == nullptr)
    return absl::InvalidArgumentError("CollectiveAllReduceOptimizer needs an optimizer to wrap");
  if (absl::Status st = CheckOptions(options); !st.ok()) return st;
  return std::unique_ptr<CollectiveAllReduceOptimizer>(new CollectiveAllReduceOptimizer(std::move(optimizer), options));
}

namespace {

// One collective's worth of gradients: the indices (into grads_and_vars)
// of gradients of one dtype whose bytes add up to at most the threshold.
struct Bucket {
  DataType dtype = DT_INVALID;
  int64_t bytes = 0;
  std::vector<size_t> members;
  std::vector<PartialShape> shapes;  // fully defined, one per member
};

// The gradient's shape if known when the graph is built: its own, or its
// variable's (a sparse gradient's dense form may not know its row count).
PartialShape KnownShape(const Output& grad, const Output& var) {
  PartialShape shape = grad.shape();
  return shape.IsFullyDefined() ? shape : var.shape();
}

int64_t NumElements(const PartialShape& shape) {
  int64_t n = 1;
  for (int i = 0; i < shape.rank(); ++i) n *= shape.dim(i);
  return n;
}

// The cycle time in effect: the option's, else DISTFLOW_FUSION_CYCLE_MS's.
absl::StatusOr<double> CycleMs(const CollectiveAllReduceOptions& options) {
  if (options.fusion_cycle_ms.has_value()) return *options.fusion_cycle_ms;
  const char* env = std::getenv("DISTFLOW_FUSION_CYCLE_MS");
  if (env == nullptr || *env == '\0') return 0.0;
  double ms = 0;
  if (!absl::SimpleAtod(env, &ms) || !(ms >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("DISTFLOW_FUSION_CYCLE_MS is '", env,
                                                   "'; it must be a number of milliseconds, 0 or more (0: fusion "
                                                   "into buckets fixed when the graph is built)"));
  }
  return ms;
}

// Run-time fusion: one CollectiveReduce per gradient, each carrying the
// cycle, the threshold and how many gradients of its dtype the step has.
Output Reduce(const Scope& scope, const Output& x, int64_t bucket, const CollectiveAllReduceOptions& options,
              double cycle_ms = 0, int64_t set_size = 0) {
  ops::Attrs attrs = {{"group_size", options.num_replicas},
                      {"group_key", options.group_key},
                      {"instance_key", options.first_instance_key + bucket},
                      {"merge_op", options.adasum ? "Adasum" : "Add"},
                      {"final_op", options.average && !options.adasum ? "Div" : "Id"},
                      {"timeout_seconds", options.timeout_seconds},
                      {"compression", options.fp16_compression ? "fp16" : "none"}};
  if (!options.group_members.empty()) attrs.emplace_back("group_members", options.group_members);
  if (cycle_ms > 0) {
    attrs.emplace_back("fusion_cycle_ms", cycle_ms);
    attrs.emplace_back("fusion_threshold_bytes", options.fusion_threshold_bytes);
    attrs.emplace_back("fusion_set_size", set_size);
  }
  Operation op = ops::Raw(scope.WithOpName(absl::StrCat("allreduce_", bucket)), "CollectiveReduce", {x}, attrs);
  return Output(op, 0, scope);
}

// The buckets of `grads_and_vars`, filled from the last gradient backwards
// (backprop's order), one open bucket per dtype.
absl::StatusOr<std::vector<Bucket>> MakeBuckets(const Optimizer::GradsAndVars& grads_and_vars, int64_t threshold) {
  std::vector<Bucket> buckets;
  std::vector<int> open = {-1, -1};  // float32, float64
  for (size_t i = grads_and_vars.size(); i-- > 0;) {
    const auto& [grad, var] = grads_and_vars[i];
    if (!grad.ok()) continue;
    if (grad.dtype() != DT_FLOAT && grad.dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("the gradient of ", var.name(), " is ", DataTypeName(grad.dtype()),
                                                     "; collective all-reduce averages float32 and float64"));
    }
    const PartialShape shape = KnownShape(grad, var);
    const bool known = shape.IsFullyDefined();
    const int64_t bytes = known ? NumElements(shape) * static_cast<int64_t>(DataTypeSize(grad.dtype())) : 0;
    if (threshold == 0 || !known || bytes > threshold) {
      buckets.push_back(Bucket{grad.dtype(), bytes, {i}, {shape}});  // alone
      continue;
    }
    int& slot = open[grad.dtype() == DT_FLOAT ? 0 : 1];
    if (slot < 0 || buckets[static_cast<size_t>(slot)].bytes + bytes > threshold) {
      buckets.push_back(Bucket{grad.dtype(), 0, {}, {}});
      slot = static_cast<int>(buckets.size() - 1);
    }
    Bucket& b = buckets[static_cast<size_t>(slot)];
    b.bytes += bytes;
    b.members.push_back(i);
    b.shapes.push_back(shape);
  }
  return buckets;
}

// Every gradient reduced by its own CollectiveReduce, fused at run time
// (collective/fusion_buffer.h); keys in backprop's order, as the buckets'.
absl::StatusOr<Optimizer::GradsAndVars> AllReduceAtRunTime(const Scope& scope,
                                                           const Optimizer::GradsAndVars& grads_and_vars,
                                                           const CollectiveAllReduceOptions& options, double cycle_ms) {
  int64_t per_dtype[2] = {0, 0};  // float32, float64
  for (const auto& [grad, var] : grads_and_vars) {
    if (!grad.ok()) continue;
    if (grad.dtype() != DT_FLOAT && grad.dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("the gradient of ", var.name(), " is ", DataTypeName(grad.dtype()),
                                                     "; collective all-reduce averages float32 and float64"));
    }
    ++per_dtype[grad.dtype() == DT_FLOAT ? 0 : 1];
  }
  Optimizer::GradsAndVars reduced = grads_and_vars;
  int64_t key = 0;
  for (size_t i = grads_and_vars.size(); i-- > 0;) {
    const Output& grad = grads_and_vars[i].first;
    if (!grad.ok()) continue;
    reduced[i].first = Reduce(scope, grad, key++, options, cycle_ms, per_dtype[grad.dtype() == DT_FLOAT ? 0 : 1]);
  }
  RETURN_IF_ERROR(scope.status());
  return reduced;
}

}  // namespace

absl::StatusOr<Optimizer::GradsAndVars> AllReduceGradients(const Scope& scope,
                                                           const Optimizer::GradsAndVars& grads_and_vars,
                                                           const CollectiveAllReduceOptions& options) {
  if (absl::Status st = CheckOptions(options); !st.ok()) return st;
  ASSIGN_OR_RETURN(const double cycle_ms, CycleMs(options));
  if (cycle_ms > 0 && options.fusion_threshold_bytes > 0 && !options.adasum && options.num_replicas != 1) {
    return AllReduceAtRunTime(scope, grads_and_vars, options, cycle_ms);
  }
  ASSIGN_OR_RETURN(std::vector<Bucket> made,
                   MakeBuckets(grads_and_vars, options.adasum ? 0 : options.fusion_threshold_bytes));
  const std::vector<Bucket>& buckets = made;
  Optimizer::GradsAndVars reduced = grads_and_vars;
  for (size_t index = 0; index < buckets.size(); ++index) {
    const Bucket& b = buckets[index];
    const int64_t key = static_cast<int64_t>(index);
    if (b.members.size() == 1) {
      reduced[b.members[0]].first = Reduce(scope, grads_and_vars[b.members[0]].first, key, options);
      continue;
    }
    const Scope s = scope.NewSubScope(absl::StrCat("fused_allreduce_", index));
    std::vector<Output> flat;
    for (size_t m : b.members) flat.push_back(ops::Reshape(s, grads_and_vars[m].first, std::vector<int64_t>{-1}));
    const Output sum = Reduce(s, ops::Concat(s, flat, 0), key, options);
    int64_t offset = 0;
    for (size_t j = 0; j < b.members.size(); ++j) {
      const int64_t n = NumElements(b.shapes[j]);
      std::vector<int64_t> dims;
      for (int d = 0; d < b.shapes[j].rank(); ++d) dims.push_back(b.shapes[j].dim(d));
      reduced[b.members[j]].first = ops::Reshape(s, ops::Slice(s, sum, {offset}, {n}), dims);
      offset += n;
    }
  }
  RETURN_IF_ERROR(scope.status());
  return reduced;
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::ApplyGradients(const Scope& scope,
                                                                       const Optimizer::GradsAndVars& grads_and_vars,
                                                                       const Output* global_step) {
  ASSIGN_OR_RETURN(Optimizer::GradsAndVars reduced, AllReduceGradients(scope, grads_and_vars, options_));
  return optimizer_->ApplyGradients(scope, reduced, global_step);
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                                 const Output* global_step,
                                                                 const std::vector<Output>& var_list) {
  ASSIGN_OR_RETURN(Optimizer::GradsAndVars grads, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, grads, global_step);
}

std::vector<Output> GraphVariables(const Scope& scope) {
  std::vector<Output> vars;
  // Local variables (TF's LOCAL_VARIABLES: metrics' counters, a reader's
  // position) are each replica's own; they are never broadcast.
  std::set<const Node*> seen;
  for (const Output& local : ops::LocalVariables(scope)) seen.insert(local.node());
  for (const Operation& init : scope.Initializers()) {
    const Node* n = init.node();
    if (n == nullptr || n->num_inputs() < 1) continue;
    const Node* var = n->input(0).node;
    if (var == nullptr) continue;
    Operation op(var, init.graph_state());
    if (op.op_type() != "VariableV2" && op.op_type() != "Variable") continue;
    if (seen.insert(var).second) vars.emplace_back(op, 0, scope);
  }
  return vars;
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::BroadcastVariables(const Scope& scope,
                                                                           const std::vector<Output>& vars,
                                                                           int root_rank) {
  if (root_rank != kGroupRoot && (root_rank < 0 || root_rank >= options_.num_replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BroadcastVariables: root_rank ", root_rank, " is not a rank of the group of num_replicas=",
                     options_.num_replicas, " (0..", options_.num_replicas - 1, "; or kGroupRoot, the group's root)"));
  }
  const std::vector<Output> all = vars.empty() ? GraphVariables(scope) : vars;
  std::vector<Operation> assigns;
  int64_t index = 0;
  for (const Output& var : all) {
    const int64_t instance = options_.first_instance_key + kBroadcastOffset + index++;
    const DataType dtype = var.dtype();
    if (dtype != DT_FLOAT && dtype != DT_DOUBLE && dtype != DT_INT32 && dtype != DT_INT64) {
      return absl::InvalidArgumentError(absl::StrCat("cannot broadcast ", var.name(), ": it is ", DataTypeName(dtype),
                                                     "; collectives carry float32, float64, int32 and int64 (pass "
                                                     "the variables to broadcast to BroadcastVariables)"));
    }
    const PartialShape shape = var.shape();
    if (!shape.IsFullyDefined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot broadcast ", var.name(), ": its shape ", shape.DebugString(), " is not fully defined"));
    }
    const Scope s = scope.WithOpName(absl::StrCat("broadcast_", index - 1));
    ops::Attrs attrs = {{"group_size", options_.num_replicas},
                        {"group_key", options_.group_key},
                        {"instance_key", instance},
                        {"shape", shape},
                        {"T", var.dtype()},
                        {"timeout_seconds", options_.timeout_seconds},
                        {"from_group_root", root_rank == kGroupRoot}};
    if (root_rank != kGroupRoot) attrs.emplace_back("root_rank", int64_t{root_rank});
    if (!options_.group_members.empty()) attrs.emplace_back("group_members", options_.group_members);
    if (options_.num_replicas == 1) break;  // nothing to send to
    // Every rank offers its value; the group's root (rank 0 at the start,
    // the oldest rank after a rebuild), or rank root_rank, sends, and every
    // rank assigns what it sent (the root its own value again).
    Operation bcast = ops::Raw(s, "CollectiveBcastSend", {var}, attrs);
    assigns.push_back(ops::Assign(scope, var, Output(bcast, 0, scope)).op());
  }
  RETURN_IF_ERROR(scope.status());
  return ops::Group(scope.WithOpName("broadcast_variables"), assigns);
}

}  // namespace distflow
