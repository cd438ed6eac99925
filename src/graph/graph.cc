#include "graph/graph.h"

#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "graph/attr_value.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status NodeError(const proto::NodeDef& def, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("Node '", def.name(), "' (", def.op(), "): ", msg));
}

bool ValidNodeName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/'))
      return false;
  }
  return name[0] != '/' && name[0] != '-';
}

bool AttrKindMatches(const std::string& kind, const proto::AttrValue& v) {
  std::string actual = AttrKind(v);
  if (actual == kind) return true;
  return actual == "list()" && kind.rfind("list(", 0) == 0;  // an empty list fits any list kind
}

}  // namespace

absl::Status ParseTensorName(const std::string& input, std::string* node, int* index) {
  if (input.empty()) return absl::InvalidArgumentError("empty input name");
  if (input[0] == '^') {
    *node = input.substr(1);
    *index = -1;
    if (node->empty()) return absl::InvalidArgumentError("empty control input name '^'");
    return absl::OkStatus();
  }
  size_t colon = input.rfind(':');
  if (colon == std::string::npos) {
    *node = input;
    *index = 0;
    return absl::OkStatus();
  }
  *node = input.substr(0, colon);
  if (node->empty() || !absl::SimpleAtoi(input.substr(colon + 1), index) || *index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed input name '", input, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Node*> Graph::AddNode(proto::NodeDef def) {
  if (!ValidNodeName(def.name())) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid node name '", def.name(), "' (op ", def.op(),
                                                   "): use letters, digits, '_', '.', '-', '/'"));
  }
  if (by_name_.contains(def.name())) {
    return NodeError(def, "a node with this name already exists in the graph");
  }
  absl::StatusOr<const OpDef*> op_or = registry_->LookUpOrError(def.op());
  if (!op_or.ok()) return NodeError(def, op_or.status().message());
  const OpDef& op = **op_or;

  auto node = std::make_unique<Node>();
  node->op_def_ = &op;

  // Resolve inputs: data inputs first, then control inputs.
  std::vector<NodeOut> data;
  bool seen_control = false;
  for (int i = 0; i < def.input_size(); ++i) {
    std::string src;
    int index;
    absl::Status s = ParseTensorName(def.input(i), &src, &index);
    if (!s.ok()) return NodeError(def, absl::StrCat("input ", i, ": ", s.message()));
    auto it = by_name_.find(src);
    if (it == by_name_.end()) {
      return NodeError(def, absl::StrCat("input ", i, " '", def.input(i), "' refers to node '", src,
                                         "', which is not in the graph (dangling input or a cycle)"));
    }
    if (index < 0) {
      seen_control = true;
      node->control_inputs_.push_back(it->second);
      continue;
    }
    if (seen_control) return NodeError(def, "data input after a control input");
    if (index >= it->second->num_outputs()) {
      return NodeError(def, absl::StrCat("input ", i, " '", def.input(i), "': node '", src, "' has only ",
                                         it->second->num_outputs(), " outputs"));
    }
    data.push_back({it->second, index});
  }

  // Attributes must be declared by the op and of the declared kind.
  for (const auto& [name, value] : def.attr()) {
    if (name.rfind("_", 0) == 0) continue;  // internal attributes (e.g. _class) are free-form
    const AttrDef* a = op.FindAttr(name);
    if (a == nullptr) return NodeError(def, absl::StrCat("unknown attribute '", name, "'"));
    if (!AttrKindMatches(a->kind, value)) {
      return NodeError(def, absl::StrCat("attribute '", name, "' should be ", a->kind, " but is ", AttrKind(value)));
    }
  }

  // Infer list lengths: a single variable-length input arg takes what is
  // left (a list of mixed dtypes takes their dtypes too).
  int fixed = 0, lists = 0;
  for (const ArgDef& arg : op.inputs) (arg.number_attr.empty() && arg.type_list_attr.empty() ? fixed : lists)++;
  for (const ArgDef& arg : op.inputs) {
    if (lists != 1 || static_cast<int>(data.size()) < fixed) continue;
    if (!arg.number_attr.empty() && !HasAttr(def, arg.number_attr)) {
      SetAttrInt(&def, arg.number_attr, static_cast<int64_t>(data.size()) - fixed);
    }
    if (!arg.type_list_attr.empty() && !HasAttr(def, arg.type_list_attr)) {
      size_t start = 0;
      for (const ArgDef& a : op.inputs) {
        if (&a == &arg) break;
        ++start;
      }
      std::vector<DataType> types;
      for (size_t i = start; i < start + data.size() - static_cast<size_t>(fixed); ++i) {
        types.push_back(data[i].node->output_type(data[i].index));
      }
      SetAttrTypeList(&def, arg.type_list_attr, types);
    }
  }

  // Walk the input args, checking arity and dtypes, inferring type attributes.
  size_t next = 0;
  for (const ArgDef& arg : op.inputs) {
    int64_t n = 1;
    std::vector<DataType> list_types;
    if (!arg.number_attr.empty()) {
      absl::StatusOr<int64_t> v = GetAttrInt(def, arg.number_attr);
      if (!v.ok()) return NodeError(def, v.status().message());
      n = *v;
    } else if (!arg.type_list_attr.empty()) {
      absl::StatusOr<std::vector<DataType>> v = GetAttrTypeList(def, arg.type_list_attr);
      if (!v.ok()) return NodeError(def, v.status().message());
      list_types = std::move(*v);
      n = static_cast<int64_t>(list_types.size());
    }
    for (int64_t k = 0; k < n; ++k, ++next) {
      if (next >= data.size()) {
        return NodeError(def, absl::StrCat("expects input '", arg.name, "' (input ", next, ") but has only ",
                                           data.size(), " data inputs"));
      }
      const NodeOut& in = data[next];
      DataType got = in.node->output_type(in.index);
      DataType want = arg.type_list_attr.empty() ? arg.type : list_types[static_cast<size_t>(k)];
      if (want == DT_INVALID) {
        if (!HasAttr(def, arg.type_attr)) SetAttrType(&def, arg.type_attr, got);
        absl::StatusOr<DataType> t = GetAttrType(def, arg.type_attr);
        if (!t.ok()) return NodeError(def, t.status().message());
        want = *t;
      }
      if (got != want) {
        return NodeError(def,
                         absl::StrCat("input ", next, " ('", arg.name, "' from '", in.node->name(), ":", in.index,
                                      "') has dtype ", DataTypeName(got), " but ", DataTypeName(want), " is expected"));
      }
      bool src_ref = in.node->output_is_ref(in.index);
      if (arg.is_ref && !src_ref) {
        return NodeError(def, absl::StrCat("input ", next, " ('", arg.name, "') must be a variable, but '",
                                           in.node->name(), "' (", in.node->op(), ") is not one"));
      }
      node->inputs_.push_back(in);
      node->input_types_.push_back(want);
      node->input_refs_.push_back(arg.is_ref);
    }
  }
  if (next != data.size()) {
    return NodeError(def, absl::StrCat("takes ", next, " data inputs but was given ", data.size()));
  }

  // Defaults, required attributes, allowed types, minimums.
  for (const AttrDef& a : op.attrs) {
    if (!HasAttr(def, a.name)) {
      if (!a.has_default)
        return NodeError(def, absl::StrCat("missing required attribute '", a.name, "' (", a.kind, ")"));
      (*def.mutable_attr())[a.name] = a.default_value;
    }
    if (a.kind == "type") {
      absl::StatusOr<DataType> t = GetAttrType(def, a.name);
      if (!t.ok()) return NodeError(def, t.status().message());
      if (!a.allowed_types.empty() &&
          std::find(a.allowed_types.begin(), a.allowed_types.end(), *t) == a.allowed_types.end()) {
        std::vector<std::string> names;
        for (DataType d : a.allowed_types) names.push_back(DataTypeName(d));
        return NodeError(def,
                         absl::StrCat("attribute '", a.name, "' is ", DataTypeName(*t),
                                      ", which is not one of the allowed types {", absl::StrJoin(names, ", "), "}"));
      }
    }
    if (a.has_minimum) {
      absl::StatusOr<int64_t> v = GetAttrInt(def, a.name);
      if (!v.ok()) return NodeError(def, v.status().message());
      if (*v < a.minimum) {
        return NodeError(def, absl::StrCat("attribute '", a.name, "' is ", *v, ", less than the minimum ", a.minimum));
      }
    }
  }

  // Output types.
  for (const ArgDef& arg : op.outputs) {
    if (!arg.type_list_attr.empty()) {
      absl::StatusOr<std::vector<DataType>> v = GetAttrTypeList(def, arg.type_list_attr);
      if (!v.ok()) return NodeError(def, v.status().message());
      if (v->size() > 100000) return NodeError(def, absl::StrCat("output count ", v->size(), " is out of range"));
      for (DataType t : *v) {
        node->output_types_.push_back(t);
        node->output_refs_.push_back(arg.is_ref);
      }
      continue;
    }
    int64_t n = 1;
    if (!arg.number_attr.empty()) {
      absl::StatusOr<int64_t> v = GetAttrInt(def, arg.number_attr);
      if (!v.ok()) return NodeError(def, v.status().message());
      if (*v < 0 || *v > 100000) return NodeError(def, absl::StrCat("output count ", *v, " is out of range"));
      n = *v;
    }
    DataType t = arg.type;
    if (t == DT_INVALID) {
      absl::StatusOr<DataType> v = GetAttrType(def, arg.type_attr);
      if (!v.ok()) return NodeError(def, v.status().message());
      t = *v;
    }
    for (int64_t k = 0; k < n; ++k) {
      node->output_types_.push_back(t);
      node->output_refs_.push_back(arg.is_ref);
    }
  }

  if (def.op() == "Const") {
    absl::StatusOr<Tensor> v = GetAttrTensor(def, "value");
    if (!v.ok()) return NodeError(def, v.status().message());
    absl::StatusOr<DataType> dt = GetAttrType(def, "dtype");
    if (dt.ok() && *dt != v->dtype()) {
      return NodeError(def, absl::StrCat("value has dtype ", DataTypeName(v->dtype()), " but dtype attribute is ",
                                         DataTypeName(*dt)));
    }
    node->const_value_ = *v;
  }

  // Shape inference.
  std::vector<PartialShape> in_shapes;
  std::vector<const Tensor*> in_values;
  for (const NodeOut& in : node->inputs_) {
    in_shapes.push_back(in.node->output_shape(in.index));
    in_values.push_back(in.index == 0 ? in.node->const_value() : nullptr);
  }
  InferenceContext ctx(def, std::move(in_shapes), node->input_types_, std::move(in_values), node->num_outputs());
  if (op.shape_fn) {
    absl::Status s = op.shape_fn(&ctx);
    if (!s.ok()) return NodeError(def, s.message());
  } else {
    (void)UnknownShape(&ctx);
  }
  node->output_shapes_ = ctx.outputs();

  node->def_ = std::move(def);
  node->id_ = static_cast<int>(nodes_.size());
  Node* raw = node.get();
  by_name_[raw->name()] = raw;
  nodes_.push_back(std::move(node));
  return raw;
}

absl::StatusOr<std::unique_ptr<Graph>> Graph::FromGraphDef(const proto::GraphDef& def, const OpRegistry* registry) {
  auto g = std::make_unique<Graph>(registry);
  absl::Status s = g->ExtendInPlace(def);  // a failed graph is dropped whole
  if (!s.ok()) return s;
  return g;
}

namespace {

// Protobuf equality where a NaN attribute equals itself (the default
// comparator says NaN != NaN, which would make a node differ from its copy).
bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  return differ.Compare(a, b);
}

}  // namespace

absl::Status Graph::Extend(const proto::GraphDef& def) {
  if (nodes_.empty()) {
    // Nothing can point at nodes yet: on an error, start over empty.
    absl::Status s = ExtendInPlace(def);
    if (!s.ok()) {
      by_name_.clear();
      nodes_.clear();
    }
    return s;
  }
  // Others may hold our Node pointers (cached executors), so the graph is
  // extended in place, after the extension has been validated on a copy: a
  // node failing halfway must not leave the nodes added before it.
  proto::GraphDef current;
  ToGraphDef(&current);
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> probe, FromGraphDef(current, registry_));
  RETURN_IF_ERROR(probe->ExtendInPlace(def));
  return ExtendInPlace(def);
}

absl::Status Graph::ExtendInPlace(const proto::GraphDef& def) {
  // Index the new nodes, rejecting duplicates and conflicting redefinitions.
  absl::flat_hash_map<std::string, int> index;
  std::vector<int> pending;
  for (int i = 0; i < def.node_size(); ++i) {
    const proto::NodeDef& n = def.node(i);
    if (index.contains(n.name())) return NodeError(n, "a node with this name appears twice in the GraphDef");
    index[n.name()] = i;
    if (const Node* existing = FindNode(n.name())) {
      if (!SameMessage(existing->def(), n)) {
        // Defaults may have been filled in; compare what the caller specified.
        proto::NodeDef a = existing->def();
        bool same = a.op() == n.op() && a.device() == n.device() && a.input_size() == n.input_size();
        for (int k = 0; same && k < n.input_size(); ++k) same = a.input(k) == n.input(k);
        for (const auto& [name, v] : n.attr()) {
          auto it = a.attr().find(name);
          same = same && it != a.attr().end() && SameMessage(it->second, v);
        }
        if (!same) return NodeError(n, "a different node with this name is already in the graph");
      }
      continue;
    }
    pending.push_back(i);
  }
  // Kahn's algorithm over the new nodes; inputs already in the graph are
  // satisfied, and a Merge's inputs from NextIteration nodes (loops' back
  // edges) are connected after every node is in.
  absl::flat_hash_map<int, int> missing;
  absl::flat_hash_map<std::string, std::vector<int>> consumers;
  struct BackEdge {
    int node = 0;
    int input = 0;
  };
  std::vector<BackEdge> back_edges;
  std::deque<int> ready;
  for (int i : pending) {
    const proto::NodeDef& n = def.node(i);
    int count = 0;
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& in = n.input(k);
      std::string src;
      int idx;
      absl::Status s = ParseTensorName(in, &src, &idx);
      if (!s.ok()) return NodeError(n, s.message());
      const Node* existing = FindNode(src);
      auto it = index.find(src);
      if (existing == nullptr && it == index.end()) {
        return NodeError(n, absl::StrCat("input '", in, "' refers to node '", src, "', which does not exist"));
      }
      const std::string& src_op = existing != nullptr ? existing->op() : def.node(it->second).op();
      if (n.op() == "Merge" && idx >= 0 && src_op == "NextIteration") {
        back_edges.push_back({i, k});
        continue;
      }
      if (existing != nullptr) continue;
      consumers[src].push_back(i);
      ++count;
    }
    missing[i] = count;
    if (count == 0) ready.push_back(i);
  }
  absl::flat_hash_map<int, std::vector<int>> back_inputs;  // Merge -> its back-edge inputs
  for (const BackEdge& e : back_edges) back_inputs[e.node].push_back(e.input);
  size_t added = 0;
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    auto b = back_inputs.find(i);
    absl::StatusOr<const Node*> n;
    if (b == back_inputs.end()) {
      n = AddNode(def.node(i));
    } else {
      // Stand in the first forward data input for each back edge.
      proto::NodeDef stand_in = def.node(i);
      int forward = -1;
      for (int k = 0; k < stand_in.input_size() && forward < 0; ++k) {
        bool is_back = std::find(b->second.begin(), b->second.end(), k) != b->second.end();
        if (!is_back && stand_in.input(k)[0] != '^') forward = k;
      }
      if (forward < 0) return NodeError(stand_in, "every data input comes from a NextIteration (a loop with no entry)");
      for (int k : b->second) stand_in.set_input(k, stand_in.input(forward));
      n = AddNode(std::move(stand_in));
    }
    RETURN_IF_ERROR(n.status());
    ++added;
    for (int c : consumers[def.node(i).name()]) {
      if (--missing[c] == 0) ready.push_back(c);
    }
  }
  if (added != pending.size()) {
    std::vector<std::string> cycle;
    for (int i : pending)
      if (missing[i] > 0) cycle.push_back(def.node(i).name());
    return absl::InvalidArgumentError(absl::StrCat("The graph has a cycle among nodes: ", absl::StrJoin(cycle, ", ")));
  }
  for (const BackEdge& e : back_edges) {
    const proto::NodeDef& n = def.node(e.node);
    std::string src;
    int idx = 0;
    RETURN_IF_ERROR(ParseTensorName(n.input(e.input), &src, &idx));
    RETURN_IF_ERROR(SetBackEdge(n.name(), e.input, NodeOut{FindNode(src), idx}));
  }
  return absl::OkStatus();
}

absl::Status Graph::SetBackEdge(const std::string& merge, int index, NodeOut src) {
  Node* m = FindMutableNode(merge);
  if (m == nullptr) return absl::InvalidArgumentError(absl::StrCat("Back edge into '", merge, "': no such node"));
  if (m->op() != "Merge" || src.node == nullptr || src.node->op() != "NextIteration") {
    return NodeError(m->def(), absl::StrCat("a back edge must go from a NextIteration into a Merge, not from '",
                                            src.node == nullptr ? "<null>" : src.node->name(), "'"));
  }
  if (index < 0 || index >= m->num_inputs()) {
    return NodeError(m->def(), absl::StrCat("back edge into input ", index, ", but the node has ", m->num_inputs()));
  }
  if (src.index != 0 || src.node->output_type(0) != m->input_type(index)) {
    return NodeError(m->def(), absl::StrCat("back edge from '", src.node->name(), "' carries ",
                                            DataTypeName(src.node->output_type(0)), ", input ", index, " expects ",
                                            DataTypeName(m->input_type(index))));
  }
  m->inputs_[static_cast<size_t>(index)] = src;
  m->def_.set_input(index, src.node->name());
  return absl::OkStatus();
}

void Graph::ToGraphDef(proto::GraphDef* out) const {
  out->Clear();
  for (const auto& n : nodes_) *out->add_node() = n->def();
}

const Node* Graph::FindNode(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Node* Graph::FindMutableNode(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> Graph::NodeNames() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->name());
  return out;
}

absl::StatusOr<TensorId> ParseTensorId(const std::string& name) {
  std::string node;
  int index = 0;
  absl::Status s = ParseTensorName(name, &node, &index);
  if (!s.ok() || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Malformed tensor name '", name, "'; expected 'node' or 'node:index'"));
  }
  return TensorId{node, index};
}

}  // namespace distflow
