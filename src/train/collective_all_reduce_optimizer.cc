#include "distflow/train/collective_all_reduce_optimizer.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace distflow {

absl::StatusOr<std::unique_ptr<CollectiveAllReduceOptimizer>> CollectiveAllReduceOptimizer::Create(
    std::unique_ptr<Optimizer> optimizer, CollectiveAllReduceOptions options) {
  if (optimizer == nullptr)
    return absl::InvalidArgumentError("CollectiveAllReduceOptimizer needs an optimizer to wrap");
  if (options.num_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CollectiveAllReduceOptions::num_replicas must be at least 1, got ", options.num_replicas));
  }
  if (options.rank < 0 || options.rank >= options.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("CollectiveAllReduceOptions::rank is ", options.rank,
                                                   " but the group has ranks 0..", options.num_replicas - 1));
  }
  return std::unique_ptr<CollectiveAllReduceOptimizer>(new CollectiveAllReduceOptimizer(std::move(optimizer), options));
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::ApplyGradients(const Scope& scope,
                                                                       const Optimizer::GradsAndVars& grads_and_vars,
                                                                       const Output* global_step) {
  Optimizer::GradsAndVars reduced;
  int64_t index = 0;
  for (const auto& [grad, var] : grads_and_vars) {
    const int64_t instance = options_.first_instance_key + index++;
    if (!grad.ok()) {
      reduced.emplace_back(grad, var);
      continue;
    }
    if (grad.dtype() != DT_FLOAT && grad.dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("the gradient of ", var.name(), " is ", DataTypeName(grad.dtype()),
                                                     "; CollectiveAllReduceOptimizer averages float32 and float64"));
    }
    Operation op = ops::Raw(scope.WithOpName(absl::StrCat("allreduce_", index - 1)), "CollectiveReduce", {grad},
                            {{"group_size", options_.num_replicas},
                             {"group_key", options_.group_key},
                             {"instance_key", instance},
                             {"merge_op", "Add"},
                             {"final_op", options_.average ? "Div" : "Id"},
                             {"timeout_seconds", options_.timeout_seconds}});
    if (!scope.ok()) return scope.status();
    reduced.emplace_back(Output(op, 0, scope), var);
  }
  return optimizer_->ApplyGradients(scope, reduced, global_step);
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                                 const Output* global_step,
                                                                 const std::vector<Output>& var_list) {
  ASSIGN_OR_RETURN(Optimizer::GradsAndVars grads, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, grads, global_step);
}

absl::StatusOr<Operation> CollectiveAllReduceOptimizer::BroadcastVariables(const Scope& scope,
                                                                           const std::vector<Output>& vars) {
  const std::vector<Output> all = vars.empty() ? scope.TrainableVariables() : vars;
  std::vector<Operation> assigns;
  int64_t index = 0;
  for (const Output& var : all) {
    const int64_t instance = options_.first_instance_key + kBroadcastOffset + index++;
    const PartialShape shape = var.shape();
    if (!shape.IsFullyDefined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot broadcast ", var.name(), ": its shape ", shape.DebugString(), " is not fully defined"));
    }
    const Scope s = scope.WithOpName(absl::StrCat("broadcast_", index - 1));
    const ops::Attrs attrs = {{"group_size", options_.num_replicas},
                              {"group_key", options_.group_key},
                              {"instance_key", instance},
                              {"shape", shape},
                              {"T", var.dtype()},
                              {"timeout_seconds", options_.timeout_seconds}};
    if (options_.num_replicas == 1) break;  // nothing to send to
    if (options_.rank == 0) {
      assigns.push_back(ops::Raw(s, "CollectiveBcastSend", {var}, attrs));
    } else {
      Operation recv = ops::Raw(s, "CollectiveBcastRecv", {}, attrs);
      assigns.push_back(ops::Assign(scope, var, Output(recv, 0, scope)).op());
    }
  }
  if (!scope.ok()) return scope.status();
  return ops::Group(scope.WithOpName("broadcast_variables"), assigns);
}

}  // namespace distflow
