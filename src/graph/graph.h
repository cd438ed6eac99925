// Graph: a validated, typed, shape-inferred dataflow graph.
//
// Nodes are added one at a time, each after its inputs, so every node is
// checked as it arrives: the op exists, the attributes match the op's
// definition (missing type and length attributes are inferred from the
// inputs, defaults filled in), every input exists with the right dtype, and
// the op's shape function accepts the input shapes. FromGraphDef sorts a
// GraphDef topologically first and reports a cycle by naming its nodes.
// Every error is InvalidArgument naming the node and its op.
//
// A Graph owns its nodes. Not thread-safe for mutation; const use from many
// threads is safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"
#include "graph/op_def.h"
#include "proto/graph.pb.h"

namespace distflow {

class Node;

// One output of a node: the source end of a data edge.
struct NodeOut {
  const Node* node = nullptr;
  int index = 0;
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name(); }
  const std::string& op() const { return def_.op(); }
  const proto::NodeDef& def() const { return def_; }
  const OpDef& op_def() const { return *op_def_; }
  bool is_stateful() const { return op_def_->is_stateful; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const NodeOut& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  const std::vector<NodeOut>& inputs() const { return inputs_; }
  DataType input_type(int i) const { return input_types_[static_cast<size_t>(i)]; }
  bool input_is_ref(int i) const { return input_refs_[static_cast<size_t>(i)]; }
  const std::vector<const Node*>& control_inputs() const { return control_inputs_; }

  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType output_type(int i) const { return output_types_[static_cast<size_t>(i)]; }
  bool output_is_ref(int i) const { return output_refs_[static_cast<size_t>(i)]; }
  const PartialShape& output_shape(int i) const { return output_shapes_[static_cast<size_t>(i)]; }

  // The value of a Const node (nullptr for other ops).
  const Tensor* const_value() const { return const_value_.IsInitialized() ? &const_value_ : nullptr; }

  // The device the placer chose; empty until placement.
  const std::string& assigned_device() const { return assigned_device_; }
  void set_assigned_device(std::string d) { assigned_device_ = std::move(d); }

 private:
  friend class Graph;
  int id_ = -1;
  proto::NodeDef def_;
  const OpDef* op_def_ = nullptr;
  std::vector<NodeOut> inputs_;
  std::vector<DataType> input_types_;
  std::vector<bool> input_refs_;
  std::vector<const Node*> control_inputs_;
  std::vector<DataType> output_types_;
  std::vector<bool> output_refs_;
  std::vector<PartialShape> output_shapes_;
  Tensor const_value_;
  std::string assigned_device_;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* registry = OpRegistry::Global()) : registry_(registry) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Validates `def` against its op and the nodes already in the graph, infers
  // its types and shapes, and adds it. On error the graph is unchanged.
  absl::StatusOr<const Node*> AddNode(proto::NodeDef def);

  // Closes a loop: data input `index` of the Merge `merge` becomes `src`, the
  // output of a NextIteration added after it (the one edge that may point
  // backwards in the node order; the Merge was added with a stand-in there).
  // Its shape is not re-inferred: the while-loop builders check the loop's
  // shape invariants themselves.
  absl::Status SetBackEdge(const std::string& merge, int index, NodeOut src);

  // Builds a graph from a GraphDef in any node order (a Merge's input from a
  // NextIteration is a back edge, connected last).
  static absl::StatusOr<std::unique_ptr<Graph>> FromGraphDef(const proto::GraphDef& def,
                                                             const OpRegistry* registry = OpRegistry::Global());
  // Adds every node of `def` not yet in this graph; a node with a name already
  // present must be identical to it. On error the graph is unchanged. Used by
  // Session::Extend.
  absl::Status Extend(const proto::GraphDef& def);

  // Nodes in the order they were added (a topological order but for back edges).
  void ToGraphDef(proto::GraphDef* out) const;

  const Node* FindNode(const std::string& name) const;
  Node* FindMutableNode(const std::string& name);
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node* node(int id) const { return nodes_[static_cast<size_t>(id)].get(); }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<std::string> NodeNames() const;
  const OpRegistry* registry() const { return registry_; }

 private:
  // Extend without the all-or-nothing guarantee: an error may leave the
  // nodes added before it.
  absl::Status ExtendInPlace(const proto::GraphDef& def);

  const OpRegistry* registry_;
  std::vector<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_map<std::string, Node*> by_name_;
};

// Splits "node:3" into ("node", 3), "node" into ("node", 0), "^node" into
// ("node", -1). InvalidArgument for an empty name or a bad index.
absl::Status ParseTensorName(const std::string& input, std::string* node, int* index);

// A tensor named "node:index".
struct TensorId {
  std::string node;
  int index = 0;
};

// Parses "node:3" / "node" into a TensorId (InvalidArgument if malformed).
absl::StatusOr<TensorId> ParseTensorId(const std::string& name);

}  // namespace distflow
