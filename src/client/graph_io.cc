#include "distflow/graph_io.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/graph_state.h"
#include "proto/graph.pb.h"

namespace distflow {
namespace {

// "name:2" -> (name, 2); "name" and "^name" -> (name, 0).
std::pair<std::string, int> SourceOf(const std::string& input) {
  std::string name = !input.empty() && input[0] == '^' ? input.substr(1) : input;
  int slot = 0;
  size_t colon = name.rfind(':');
  if (colon != std::string::npos && absl::SimpleAtoi(name.substr(colon + 1), &slot)) name.resize(colon);
  return {name, slot};
}

}  // namespace

std::string SerializeGraph(const Scope& scope) {
  proto::GraphDef def;
  scope.ToGraphDef(&def);
  return def.SerializeAsString();
}

absl::StatusOr<std::vector<Operation>> ImportGraph(const Scope& scope, const std::string& graph_def,
                                                   const std::string& prefix, bool clear_devices) {
  proto::GraphDef def;
  if (!def.ParseFromString(graph_def)) {
    return absl::InvalidArgumentError("ImportGraph: the bytes are not a GraphDef (a damaged file?)");
  }
  const int n = def.node_size();
  std::unordered_map<std::string, int> index;
  for (int i = 0; i < n; ++i) {
    if (!index.emplace(def.node(i).name(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ImportGraph: the graph has two nodes named '", def.node(i).name(), "'"));
    }
  }
  // A while loop's back edge (a Merge reading a NextIteration) is left out
  // of the order: the Merge is added with its forward input standing in,
  // and the edge is connected once every node is in, as the loop builder
  // (control_flow.cc) does.
  auto is_back_edge = [&](int i, const std::string& in) {
    if (def.node(i).op() != "Merge" || in.empty() || in[0] == '^') return false;
    auto it = index.find(SourceOf(in).first);
    return it != index.end() && def.node(it->second).op() == "NextIteration";
  };
  // Kahn's order: a node once every node it reads (data or control) is in.
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : def.node(i).input()) {
      auto it = index.find(SourceOf(in).first);
      if (it == index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ImportGraph: node '", def.node(i).name(), "' reads '", in, "', which is not in the graph"));
      }
      if (is_back_edge(i, in)) continue;
      ++pending[i];
      consumers[it->second].push_back(i);
    }
  }
  std::vector<int> order;
  order.reserve(n);
  std::deque<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop_front();
    order.push_back(i);
    for (int c : consumers[i])
      if (--pending[c] == 0) ready.push_back(c);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i) {
      if (pending[i] > 0) {
        return absl::InvalidArgumentError(absl::StrCat("ImportGraph: the graph has a cycle through '",
                                                       def.node(i).name(),
                                                       "' that is not a while loop's back edge (NextIteration "
                                                       "into Merge)"));
      }
    }
  }
  struct BackEdge {
    int merge = 0;
    int input = 0;
    std::string source;
    int slot = 0;
  };
  std::vector<BackEdge> back_edges;
  std::vector<Operation> ops(n);
  std::vector<Operation> added;
  added.reserve(n);
  for (int i : order) {
    proto::NodeDef node = def.node(i);
    std::vector<Output> inputs;
    std::vector<Operation> control;
    std::vector<int> back;  // positions in `inputs` of back edges
    for (int k = 0; k < node.input_size(); ++k) {
      const std::string& in = node.input(k);
      auto [name, slot] = SourceOf(in);
      if (is_back_edge(i, in)) {
        back_edges.push_back({i, static_cast<int>(inputs.size()), name, slot});
        back.push_back(static_cast<int>(inputs.size()));
        inputs.emplace_back();  // filled with the forward input below
        continue;
      }
      const Operation& from = ops[index[name]];
      if (in[0] == '^') {
        control.push_back(from);
      } else {
        inputs.emplace_back(from, slot, scope);
      }
    }
    if (!back.empty()) {
      const Output* forward = nullptr;
      for (size_t k = 0; k < inputs.size() && forward == nullptr; ++k) {
        if (std::find(back.begin(), back.end(), static_cast<int>(k)) == back.end()) forward = &inputs[k];
      }
      if (forward == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("ImportGraph: Merge '", def.node(i).name(),
                                                       "' reads only NextIteration nodes (a loop with no entry)"));
      }
      const Output stand_in = *forward;
      for (int k : back) inputs[static_cast<size_t>(k)] = stand_in;
    }
    const std::string device = clear_devices ? std::string() : node.device();
    // Colocation classes name nodes of the imported graph: prefix them too,
    // as TensorFlow's importer does.
    auto classes = node.mutable_attr()->find("_class");
    if (!prefix.empty() && classes != node.mutable_attr()->end() && classes->second.has_list()) {
      for (std::string& c : *classes->second.mutable_list()->mutable_s()) {
        if (c.rfind("loc:@", 0) == 0 && index.count(c.substr(5)) > 0) c = absl::StrCat("loc:@", prefix, c.substr(5));
      }
    }
    node.clear_input();
    node.clear_name();
    node.clear_device();
    Scope s = scope.WithFullOpName(prefix + def.node(i).name()).WithDevice(device);
    s = control.empty() ? s.WithNoControlDependencies()
                        : s.WithNoControlDependencies().WithControlDependencies(control);
    ops[i] = s.AddNode(std::move(node), inputs);
    if (!ops[i].ok()) {
      absl::Status st = scope.status();
      return st.ok() ? absl::InternalError(absl::StrCat("ImportGraph: adding '", def.node(i).name(), "' failed")) : st;
    }
    added.push_back(ops[i]);
  }
  for (const BackEdge& e : back_edges) {
    const Operation& src = ops[index[e.source]];
    GraphState& g = *scope.graph_state();
    absl::Status st;
    {
      absl::MutexLock lock(&g.mu);
      st = g.graph.SetBackEdge(ops[e.merge].node()->name(), e.input, NodeOut{src.node(), e.slot});
    }
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("ImportGraph: ", st.message()));
  }
  // The imported name scopes ("save" of "save/path_0") are taken, as if the
  // graph had built them: a name scope or saver made later gets "save_1".
  {
    std::vector<std::string> names;
    for (const Operation& op : added) names.push_back(op.name());
    const std::shared_ptr<GraphState>& graph = scope.graph_state();
    absl::MutexLock lock(&graph->mu);
    for (const std::string& name : names) {
      for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
        int& count = graph->name_counts[name.substr(0, slash)];
        if (count == 0) count = 1;
      }
    }
  }
  return added;
}

}  // namespace distflow
