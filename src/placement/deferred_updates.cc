#include "placement/deferred_updates.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

bool IsVariableOp(const Node* n) { return n->op() == "Variable" || n->op() == "VariableV2"; }

// "name:1" or "^name" -> "name".
std::string NodeNameOf(const std::string& input) {
  absl::string_view name = input;
  if (!name.empty() && name[0] == '^') name.remove_prefix(1);
  return std::string(name.substr(0, name.find(':')));
}

// Why `n` (a remaining node of a deferred partition) cannot run after the
// step's answer; "" if it can. Sets `*update` for a variable update.
std::string WhyNotDeferrable(const Graph& graph, const proto::NodeDef& def, bool* update) {
  const Node* n = graph.FindNode(def.name());
  if (n == nullptr || n->op() != def.op()) {
    // Nodes the partitioner made: control tokens and the like.
    return def.op() == "Const" || def.op() == "NoOp" || def.op() == "Identity" ? "" : "it is not in the step's graph";
  }
  // A variable's node only hands out its reference (the updates' slots).
  if (IsVariableOp(n)) return "";
  bool refs = false, only_variables = true;
  for (int i = 0; i < n->num_inputs(); ++i) {
    if (!n->input_is_ref(i)) continue;
    refs = true;
    only_variables &= IsVariableOp(n->input(i).node);
  }
  if (IsVariableUpdateOp(n->op()) && refs && only_variables) {
    *update = true;
    return "";
  }
  if (refs) return "it takes a non-variable resource by reference";
  if (n->is_stateful()) return "it is stateful";
  if (HasAttr(n->def(), "shared_name")) return "it uses a shared resource";
  if (absl::StartsWith(n->op(), "_") || absl::StartsWith(n->op(), "Collective")) return "it communicates";
  return "";
}

}  // namespace

bool StepDefersUpdates(const std::vector<const Node*>& nodes) {
  for (const Node* n : nodes) {
    absl::StatusOr<bool> on = GetAttrBool(n->def(), kDeferVariableUpdatesAttr);
    if (on.ok() && *on) return true;
  }
  return false;
}

bool IsVariableUpdateOp(const std::string& op) {
  return absl::StartsWith(op, "Apply") || absl::StartsWith(op, "SparseApply") || absl::StartsWith(op, "FusedApply") ||
         absl::StartsWith(op, "Assign") || absl::StartsWith(op, "Scatter");
}

DeferredUpdateEdges::DeferredUpdateEdges(const std::vector<const Node*>& nodes,
                                         const std::vector<std::string>& placement)
    : placement_(placement) {
  for (const Node* n : nodes) {
    for (const NodeOut& in : n->inputs()) consumers_[in.node].push_back(n);
    for (const Node* c : n->control_inputs()) consumers_[c].push_back(n);
  }
}

bool DeferredUpdateEdges::ReachesDevice(const Node* from, const std::string& device) const {
  std::vector<const Node*> stack{from};
  absl::flat_hash_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (DeviceOf(n) == device) return true;
    if (auto it = consumers_.find(n); it != consumers_.end())
      stack.insert(stack.end(), it->second.begin(), it->second.end());
  }
  return false;
}

bool DeferredUpdateEdges::Defer(const Node* consumer, const Node* source, std::vector<const Node*>* stand_ins) const {
  const std::string& here = DeviceOf(consumer);
  const std::string& there = DeviceOf(source);
  if (!IsVariableUpdateOp(source->op()) || here == there || ReachesDevice(consumer, there)) return false;
  // What the update needs from the consumer's device, through nodes on its own.
  std::vector<const Node*> stack{source};
  absl::flat_hash_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (DeviceOf(n) == here) {
      stand_ins->push_back(n);
      continue;
    }
    if (DeviceOf(n) != there) continue;
    for (const NodeOut& in : n->inputs()) stack.push_back(in.node);
    stack.insert(stack.end(), n->control_inputs().begin(), n->control_inputs().end());
  }
  return true;
}

absl::Status MarkDeferredUpdates(const Graph& graph, std::map<std::string, Partition>* parts) {
  int marked = 0;
  for (auto& [device, part] : *parts) {
    absl::flat_hash_map<std::string, const proto::NodeDef*> by_name;
    for (const proto::NodeDef& n : part.graph.node()) by_name[n.name()] = &n;
    // Everything upstream of a node whose result leaves the partition runs
    // before the answer; the rest may run after it.
    std::vector<std::string> stack;
    for (const proto::NodeDef& n : part.graph.node())
      if (n.op() == "_Send" || n.op() == "_Recv") stack.push_back(n.name());
    for (const std::string& f : part.fetches) stack.push_back(NodeNameOf(f));
    absl::flat_hash_set<std::string> before;
    while (!stack.empty()) {
      std::string name = std::move(stack.back());
      stack.pop_back();
      if (!before.insert(name).second) continue;
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      for (const std::string& in : it->second->input()) stack.push_back(NodeNameOf(in));
    }
    bool update = false;
    for (const proto::NodeDef& n : part.graph.node()) {
      if (before.contains(n.name())) continue;
      std::string why = WhyNotDeferrable(graph, n, &update);
      if (!why.empty()) {
        return absl::FailedPreconditionError(absl::StrCat("node '", n.name(), "' (", n.op(), ") on ", part.task,
                                                          " would run after the step's answer, but ", why,
                                                          "; only variable updates and stateless computations can"));
      }
    }
    part.defer_updates = update;
    marked += update ? 1 : 0;
  }
  if (marked == 0) return absl::FailedPreconditionError("no task has a variable update left to run after the answer");
  return absl::OkStatus();
}

}  // namespace distflow
