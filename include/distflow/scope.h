// Scope: how a client builds a graph. A Scope carries a name scope, a device
// (or a device function), control dependencies and the graph they all add
// to; With* methods return a new Scope and never change the original.
//
//   Scope root = Scope::NewRootScope();
//   Scope ps0 = root.WithDevice("/job:ps/task:0");
//   Output w = ops::Variable(ps0.WithOpName("weights_1"), {784, 100}, DT_FLOAT);
//
// Errors (a shape mismatch, an unknown input) are recorded in the scope's
// graph: the first one is kept (until TakeScopeStatus, scope_status.h), later
// ops become no-ops, and status() or a Session::Run reports it, naming the node.
//
// Scopes of one graph may be used from one thread at a time per graph.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "distflow/export.h"
#include "distflow/partial_shape.h"
#include "distflow/types.h"

namespace distflow {

namespace proto {
class GraphDef;
class NodeDef;
}  // namespace proto

class Node;  // a node of the graph (internal: graph/graph.h)
class Output;
class Scope;
struct GraphState;  // what the scopes of one graph share (internal: client/graph_state.h)

// A node of the graph being built.
class DISTFLOW_EXPORT Operation {
 public:
  Operation() = default;
  Operation(const Node* node, std::shared_ptr<GraphState> graph) : node_(node), graph_(std::move(graph)) {}
  const Node* node() const { return node_; }
  bool ok() const { return node_ != nullptr; }
  std::string name() const;     // "<invalid>" for an invalid Operation
  std::string op_type() const;  // the op, e.g. "MatMul" ("" for an invalid Operation)
  std::string device() const;   // the device its scope asked for ("" for none)
  int num_outputs() const;      // 0 for an invalid Operation
  const std::shared_ptr<GraphState>& graph_state() const { return graph_; }

 private:
  const Node* node_ = nullptr;
  std::shared_ptr<GraphState> graph_;
};

// What a device function is shown of the node about to be added.
struct DISTFLOW_EXPORT NodeInfo {
  std::string name;             // its full name, e.g. "layer1/weights"
  std::string op;               // its op, e.g. "VariableV2", "MatMul"
  std::string device;           // the device the enclosing scopes chose ("" for none)
  DataType dtype = DT_INVALID;  // its "dtype" attribute, if it has one (variables do)
  PartialShape shape;           // its "shape" attribute, if it has one (variables do)
};

// A device function: given a node about to be added, the device to put it on
// (what TensorFlow's tf.device accepts besides a string).
using DeviceFunction = std::function<std::string(const NodeInfo&)>;

class DISTFLOW_EXPORT Scope {
 public:
  static Scope NewRootScope();

  Scope NewSubScope(const std::string& name) const;     // names become "name/op"
  Scope WithOpName(const std::string& name) const;      // the next op's exact name (within the name scope)
  Scope WithFullOpName(const std::string& name) const;  // the next op's name, ignoring the name scope
  // Nested device scopes merge as TensorFlow's tf.device does: a device
  // string overrides the fields it sets and keeps the others that outer
  // scopes chose ("" clears them all); a device function is given, as the
  // node's device, what the outer scopes chose, and its result is what the
  // inner scopes then merge into.
  Scope WithDevice(const std::string& device) const;
  Scope WithDeviceFunction(DeviceFunction fn) const;
  Scope WithControlDependencies(const std::vector<Operation>& deps) const;
  Scope WithNoControlDependencies() const;

  // The first error recorded while building, or OK.
  absl::Status status() const;
  bool ok() const { return status().ok(); }
  // Records an error (the first one wins).
  void UpdateStatus(const absl::Status& s) const;

  // A fresh name under this scope: "prefix/Op", "prefix/Op_1", ...
  std::string GetUniqueName(const std::string& base) const;

  // For op wrappers, which include distflow's internal headers: adds a node
  // built from `def` (its name and device are filled in by the scope) with
  // `inputs` and the scope's control dependencies. On error the status is
  // recorded and an invalid Operation returned. Programs add nodes with the
  // functions of distflow/ops.h (ops::Raw for any registered op).
  Operation AddNode(proto::NodeDef def, const std::vector<Output>& inputs) const;

  // For distflow's internals: the graph as a GraphDef.
  void ToGraphDef(proto::GraphDef* out) const;
  // The number of nodes in the graph.
  int num_nodes() const;
  // The operation with this full name (e.g. "layer1/weights"), or an invalid
  // Operation if the graph has none.
  Operation FindOperation(const std::string& name) const;
  const std::shared_ptr<GraphState>& graph_state() const { return graph_; }

  // Graph-level random seed: random ops without their own seed derive one.
  void SetGraphSeed(int64_t seed) const;

  // Initializers (Assign ops of variables made by MakeVariable).
  void AddInitializer(const Operation& op) const;
  std::vector<Operation> Initializers() const;

  // Variables that optimizers train by default (MakeVariable adds them).
  void AddTrainableVariable(const Output& var) const;
  std::vector<Output> TrainableVariables() const;

 private:
  Scope() = default;
  std::shared_ptr<GraphState> graph_;
  std::string prefix_;
  std::string op_name_;
  bool full_name_ = false;
  std::string device_;
  DeviceFunction device_fn_;
  std::vector<Operation> control_deps_;
};

// An output tensor of an Operation; carries the scope it was made in so that
// arithmetic operators (a + b) add their nodes next to it.
class DISTFLOW_EXPORT Output {
 public:
  Output() : scope_(Scope::NewRootScope()) {}
  Output(Operation op, int index, Scope scope) : op_(std::move(op)), index_(index), scope_(std::move(scope)) {}

  const Operation& op() const { return op_; }
  const Node* node() const { return op_.node(); }
  int index() const { return index_; }
  bool ok() const { return op_.ok(); }
  // "node:index".
  std::string name() const;
  DataType dtype() const;
  PartialShape shape() const;
  const Scope& scope() const { return scope_; }

 private:
  Operation op_;
  int index_ = 0;
  Scope scope_;
};

}  // namespace distflow
