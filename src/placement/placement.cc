#include "placement/placement.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

int Find(std::vector<int>& parent, int x) {
  while (parent[static_cast<size_t>(x)] != x) {
    parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    x = parent[static_cast<size_t>(x)];
  }
  return x;
}

std::string NoSuchDevice(const Node& n, const std::string& request, const std::vector<std::string>& devices) {
  return absl::StrCat("Cannot place node '", n.name(), "' (", n.op(), ") on '", request,
                      "': no device in the cluster matches. Available devices: ", absl::StrJoin(devices, ", "),
                      ". Fix the device name, start the missing task, or set allow_soft_placement to fall back to "
                      "an available device.");
}

}  // namespace

absl::StatusOr<std::vector<const Node*>> PruneForStep(const Graph& graph, const std::vector<TensorId>& feeds,
                                                      const std::vector<TensorId>& fetches,
                                                      const std::vector<std::string>& targets) {
  auto missing = [&](const std::string& kind, const std::string& name) {
    std::vector<std::string> close = ClosestNames(name, graph.NodeNames());
    return absl::NotFoundError(
        absl::StrCat(kind, " '", name, "' is not in the graph",
                     close.empty() ? "" : absl::StrCat("; did you mean ", absl::StrJoin(close, ", "), "?")));
  };
  absl::flat_hash_set<std::pair<std::string, int>> fed;
  std::vector<const Node*> stack;
  for (const TensorId& f : feeds) {
    const Node* n = graph.FindNode(f.node);
    if (n == nullptr) return missing("Feed", f.node);
    fed.insert({f.node, f.index});
    stack.push_back(n);
  }
  for (const TensorId& f : fetches) {
    const Node* n = graph.FindNode(f.node);
    if (n == nullptr) return missing("Fetch", f.node);
    if (f.index >= n->num_outputs()) {
      return absl::NotFoundError(
          absl::StrCat("Fetch '", f.node, ":", f.index, "': node has ", n->num_outputs(), " outputs"));
    }
    stack.push_back(n);
  }
  for (const std::string& t : targets) {
    const Node* n = graph.FindNode(t);
    if (n == nullptr) return missing("Target", t);
    stack.push_back(n);
  }
  absl::flat_hash_set<int> seen;
  std::vector<const Node*> out;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n->id()).second) continue;
    out.push_back(n);
    for (const NodeOut& in : n->inputs())
      if (!fed.contains(std::make_pair(in.node->name(), in.index))) stack.push_back(in.node);
    for (const Node* c : n->control_inputs()) stack.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return a->id() < b->id(); });
  return out;
}

absl::StatusOr<std::vector<std::string>> PlaceNodes(const Graph& graph, const std::vector<const Node*>& nodes,
                                                    const PlacementOptions& options) {
  std::vector<DeviceName> devices;
  for (const std::string& d : options.devices) {
    ASSIGN_OR_RETURN(DeviceName dn, DeviceName::Parse(d));
    devices.push_back(dn);
  }
  // Colocation groups: a ref consumer joins its variable's group.
  std::vector<int> parent(static_cast<size_t>(graph.num_nodes()));
  std::iota(parent.begin(), parent.end(), 0);
  for (const Node* n : nodes) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (n->input_is_ref(i)) {
        int a = Find(parent, n->id()), b = Find(parent, n->input(i).node->id());
        if (a != b) parent[static_cast<size_t>(a)] = b;
      }
    }
  }
  // TensorFlow's colocation attribute ("_class": ["loc:@name"]): the node
  // joins the named node's group (tf.Variable(callable) marks its initial
  // value's ops so, to compute them on the variable's device). A named node
  // outside the step still lends its request to the group.
  std::vector<const Node*> members = nodes;
  absl::flat_hash_set<int> in_step;
  for (const Node* n : nodes) in_step.insert(n->id());
  for (const Node* n : nodes) {
    if (n->def().attr().find("_class") == n->def().attr().end()) continue;
    absl::StatusOr<std::vector<std::string>> classes = GetAttrStringList(n->def(), "_class");
    if (!classes.ok()) continue;
    for (const std::string& c : *classes) {
      if (c.rfind("loc:@", 0) != 0) continue;
      const Node* target = graph.FindNode(c.substr(5));
      if (target == nullptr) continue;
      int a = Find(parent, n->id()), b = Find(parent, target->id());
      if (a != b) parent[static_cast<size_t>(a)] = b;
      if (in_step.insert(target->id()).second) members.push_back(target);
    }
  }
  // Merge the requests of each group. A variable's own request wins (a
  // queue's or reader's too): ops that use it by reference follow it
  // wherever they were asked to run (as TensorFlow's colocate_with
  // overrides device scopes).
  absl::flat_hash_map<int, DeviceName> request;
  absl::flat_hash_map<int, bool> has_variable;
  absl::flat_hash_map<int, const Node*> first_node;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Node* n : members) {
      int g = Find(parent, n->id());
      // The owner of a group: a variable, or an op with no inputs that
      // outputs a reference (a queue's or reader's handle).
      bool is_var = n->op() == "Variable" || (n->num_inputs() == 0 && n->num_outputs() > 0 && n->output_is_ref(0));
      if (pass == 0 && !is_var) continue;
      if (pass == 1 && (is_var || has_variable[g])) {
        if (!first_node.contains(g)) first_node[g] = n;
        continue;
      }
      if (!first_node.contains(g) || is_var) first_node[g] = n;
      absl::StatusOr<DeviceName> dn = DeviceName::Parse(n->def().device());
      if (!dn.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("Node '", n->name(), "' (", n->op(),
                                                       ") requests a malformed device: ", dn.status().message()));
      }
      if (is_var && !n->def().device().empty()) has_variable[g] = true;
      DeviceName& r = request[g];
      absl::Status merged = r.MergeFrom(*dn, options.allow_soft_placement);
      if (!merged.ok()) {
        if (!options.allow_soft_placement) {
          return absl::InvalidArgumentError(
              absl::StrCat("Node '", n->name(), "' (", n->op(),
                           ") must be colocated with the nodes sharing its variable, but "
                           "they request different devices: ",
                           merged.message(), ". Request the same device for both, or set allow_soft_placement."));
        }
      }
    }
  }
  // The devices of each (job, task), in their order, so that a request
  // naming its task is resolved without scanning every device of the
  // cluster (a scan per request made placement quadratic in the number of
  // tasks); and each distinct request is resolved once.
  absl::flat_hash_map<std::pair<std::string, int>, std::vector<size_t>> by_task;
  for (size_t k = 0; k < devices.size(); ++k) by_task[{devices[k].job, devices[k].task}].push_back(k);
  const std::vector<size_t> no_devices;
  size_t default_k = devices.size();
  for (size_t k = 0; k < devices.size() && default_k == devices.size(); ++k) {
    if (options.devices[k] == options.default_device) default_k = k;
  }
  absl::flat_hash_map<std::string, std::string> resolved;  // request -> device ("" if none)
  auto resolve = [&](const DeviceName& r) -> const std::string& {
    auto [it, fresh] = resolved.try_emplace(r.ToString());
    if (!fresh) return it->second;
    std::string& device = it->second;
    auto try_device = [&](size_t k) {
      if (device.empty() && r.IsSpecificationOf(devices[k])) device = options.devices[k];
    };
    if (default_k < devices.size()) try_device(default_k);
    if (r.has_job && r.has_task) {
      auto t = by_task.find({r.job, r.task});
      for (size_t k : t == by_task.end() ? no_devices : t->second) try_device(k);
    } else {
      for (size_t k = 0; k < devices.size() && device.empty(); ++k) try_device(k);
    }
    return device;
  };
  std::vector<std::string> out(static_cast<size_t>(graph.num_nodes()));
  absl::flat_hash_map<int, std::string> chosen;
  for (const Node* n : nodes) {
    int g = Find(parent, n->id());
    auto it = chosen.find(g);
    if (it == chosen.end()) {
      const DeviceName& r = request[g];
      std::string device = resolve(r);
      if (device.empty()) {
        const Node& culprit = *first_node[g];
        if (!options.allow_soft_placement) {
          return absl::InvalidArgumentError(NoSuchDevice(culprit, r.ToString(), options.devices));
        }
        DeviceName space = r.AddressSpace();
        for (size_t k = 0; k < devices.size() && device.empty(); ++k)
          if (space.IsSpecificationOf(devices[k])) device = options.devices[k];
        if (device.empty()) device = options.default_device;
      }
      it = chosen.emplace(g, device).first;
    }
    out[static_cast<size_t>(n->id())] = it->second;
    if (options.log_device_placement) LOG(INFO) << n->name() << ": (" << n->op() << ") -> " << it->second;
  }
  return out;
}

}  // namespace distflow
