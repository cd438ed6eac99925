#include "runtime/executor_plan.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "runtime/control_flow_info.h"

namespace distflow {
namespace {

std::string NotFoundWithSuggestions(const Graph& g, const std::string& kind, const std::string& name) {
  std::vector<std::string> close = ClosestNames(name, g.NodeNames());
  return absl::StrCat(kind, " '", name, "' is not in the graph",
                      close.empty() ? "" : absl::StrCat("; did you mean ", absl::StrJoin(close, ", "), "?"));
}

// A control edge out of a fed placeholder is satisfied by the feed, as in
// TensorFlow: the placeholder itself never runs (it would fail, unfed). An
// optimizer gating its updates on a gradient that is a fed placeholder needs it.
bool IsFedPlaceholder(const Node* n, const absl::flat_hash_map<std::pair<std::string, int>, int>& fed) {
  return (n->op() == "Placeholder" || n->op() == "PlaceholderV2") && fed.contains(std::make_pair(n->name(), 0));
}

}  // namespace

absl::Status BuildExecutorPlan(const Graph& graph, Device* device, KernelCache* kernels,
                               const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches,
                               const std::vector<std::string>& targets, ExecutorPlan* plan) {
  plan->feeds = feeds;

  // Validate names.
  absl::flat_hash_map<std::pair<std::string, int>, int> fed;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Node* n = graph.FindNode(feeds[i].node);
    if (n == nullptr) return absl::NotFoundError(NotFoundWithSuggestions(graph, "Feed tensor's node", feeds[i].node));
    if (feeds[i].index >= n->num_outputs()) {
      return absl::NotFoundError(absl::StrCat("Feed tensor '", feeds[i].node, ":", feeds[i].index, "': node has only ",
                                              n->num_outputs(), " outputs"));
    }
    if (!fed.emplace(std::make_pair(feeds[i].node, feeds[i].index), static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("Tensor '", feeds[i].node, ":", feeds[i].index, "' is fed twice"));
    }
    plan->feed_nodes.push_back(n);
  }
  std::vector<const Node*> roots;
  for (const TensorId& f : fetches) {
    const Node* n = graph.FindNode(f.node);
    if (n == nullptr) return absl::NotFoundError(NotFoundWithSuggestions(graph, "Fetch", f.node));
    if (f.index >= n->num_outputs()) {
      return absl::NotFoundError(
          absl::StrCat("Fetch '", f.node, ":", f.index, "': node has only ", n->num_outputs(), " outputs"));
    }
    if (!fed.contains(std::make_pair(f.node, f.index))) roots.push_back(n);
  }
  for (const std::string& t : targets) {
    const Node* n = graph.FindNode(t);
    if (n == nullptr) return absl::NotFoundError(NotFoundWithSuggestions(graph, "Target", t));
    roots.push_back(n);
  }

  // Prune: everything the roots need, not looking past fed tensors.
  std::vector<int> item_of(static_cast<size_t>(graph.num_nodes()), -1);
  std::vector<const Node*> stack = roots;
  std::vector<const Node*> needed;
  absl::flat_hash_set<int> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n->id()).second) continue;
    needed.push_back(n);
    for (int i = 0; i < n->num_inputs(); ++i) {
      const NodeOut& in = n->input(i);
      if (!fed.contains(std::make_pair(in.node->name(), in.index))) stack.push_back(in.node);
    }
    for (const Node* c : n->control_inputs()) {
      if (!IsFedPlaceholder(c, fed)) stack.push_back(c);
    }
  }
  // Keep graph order (topological) for determinism.
  std::sort(needed.begin(), needed.end(), [](const Node* a, const Node* b) { return a->id() < b->id(); });
  for (const Node* n : needed) {
    item_of[static_cast<size_t>(n->id())] = static_cast<int>(plan->items.size());
    NodeItem item;
    item.node = n;
    ASSIGN_OR_RETURN(std::shared_ptr<OpKernel> k, kernels->Get(*n, device));
    item.kernel = k;
    item.expensive = item.kernel->IsExpensive();
    item.async = item.kernel->IsAsync();
    item.work_from_values = dynamic_cast<const WorkFromValues*>(item.kernel.get());
    if (n->op() == "_Send" || n->op() == "_Recv") {
      absl::StatusOr<std::string> key = GetAttrString(n->def(), "key");
      if (key.ok()) item.transfer_key = *key;
      item.transfer = true;
    }
    item.input_start = plan->total_slots;
    plan->total_slots += n->num_inputs();
    item.out_slots.resize(static_cast<size_t>(n->num_outputs()));
    item.out_items.resize(static_cast<size_t>(n->num_outputs()));
    item.out_fetches.resize(static_cast<size_t>(n->num_outputs()));
    plan->items.push_back(std::move(item));
  }
  plan->control_flow = NeedsControlFlow(plan->items);
  for (const NodeItem& item : plan->items) {
    if (item.node->op() == "TensorArrayV3") plan->step_resources = true;
  }
  if (plan->control_flow) RETURN_IF_ERROR(BuildControlFlowInfo(graph, roots, &plan->items, &plan->frames));
  plan->feed_slots.resize(feeds.size());
  plan->feed_items.resize(feeds.size());
  for (NodeItem& item : plan->items) {
    const Node* n = item.node;
    int id = item_of[static_cast<size_t>(n->id())];
    for (int i = 0; i < n->num_inputs(); ++i) {
      const NodeOut& in = n->input(i);
      int slot = item.input_start + i;
      auto f = fed.find(std::make_pair(in.node->name(), in.index));
      if (f != fed.end()) {
        plan->feed_slots[static_cast<size_t>(f->second)].push_back(slot);
        plan->feed_items[static_cast<size_t>(f->second)].push_back(id);
      } else {
        NodeItem& src = plan->items[static_cast<size_t>(item_of[static_cast<size_t>(in.node->id())])];
        src.out_slots[static_cast<size_t>(in.index)].push_back(slot);
        src.out_items[static_cast<size_t>(in.index)].push_back(id);
      }
      ++item.initial_pending;
    }
    for (const Node* c : n->control_inputs()) {
      if (IsFedPlaceholder(c, fed)) continue;  // its feed is there when the step starts
      plan->items[static_cast<size_t>(item_of[static_cast<size_t>(c->id())])].control_out.push_back(id);
      ++item.initial_pending;
    }
  }
  if (plan->control_flow) {
    for (size_t i = 0; i < plan->items.size(); ++i) {
      NodeItem& item = plan->items[i];
      if (item.kind == CfKind::kMerge)
        item.initial_pending = (static_cast<int>(item.node->control_inputs().size()) << 1) | 1;
      if (item.frame == 0 && item.initial_pending == 0) plan->root_ready.push_back(static_cast<int>(i));
    }
  }
  for (size_t f = 0; f < fetches.size(); ++f) {
    ExecutorPlan::FetchSrc src;
    auto it = fed.find(std::make_pair(fetches[f].node, fetches[f].index));
    if (it != fed.end()) {
      src.feed = it->second;
    } else {
      src.item = item_of[static_cast<size_t>(graph.FindNode(fetches[f].node)->id())];
      src.output = fetches[f].index;
      plan->items[static_cast<size_t>(src.item)].out_fetches[static_cast<size_t>(src.output)].push_back(
          static_cast<int>(f));
    }
    plan->fetches.push_back(src);
  }
  if (!plan->control_flow) {
    for (NodeItem& item : plan->items) {
      bool fetched = false;
      for (const std::vector<int>& f : item.out_fetches) fetched |= !f.empty();
      item.outward = item.transfer || fetched;
      plan->num_outward += item.outward ? 1 : 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace distflow
