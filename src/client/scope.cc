#include "distflow/scope.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/graph_state.h"
#include "cluster/device_name.h"
#include "distflow/scope_status.h"
#include "graph/attr_value.h"

namespace distflow {

Scope Scope::NewRootScope() {
  Scope s;
  s.graph_ = std::make_shared<GraphState>();
  return s;
}

Scope Scope::NewSubScope(const std::string& name) const {
  Scope s = *this;
  std::string unique = GetUniqueName(name);
  s.prefix_ = unique;
  s.op_name_.clear();
  return s;
}

Scope Scope::WithOpName(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  s.full_name_ = false;
  return s;
}

Scope Scope::WithFullOpName(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  s.full_name_ = true;
  return s;
}

bool IsRandomOp(const std::string& op) {
  return op == "RandomUniform" || op == "RandomStandardNormal" || op == "TruncatedNormal" || op == "Dropout";
}

namespace {

// The innermost loop being built whose body holds node `name` (directly or
// in a branch of a Cond there), or nullptr.
GraphState::LoopInConstruction* InnermostLoop(GraphState& g, const std::string& name)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu) {
  GraphState::LoopInConstruction* loop = nullptr;
  for (const auto& l : g.loops_in_construction) {
    if (absl::StartsWith(name, l->frame + "/")) loop = l.get();
  }
  if (loop == nullptr || !absl::StartsWith(name.substr(loop->frame.size() + 1), "body/")) return nullptr;
  return loop;
}

std::string Ref(const NodeOut& o) { return o.index == 0 ? o.node->name() : absl::StrCat(o.node->name(), ":", o.index); }

// In a body a loop's gradient rebuilds: `def`, a random op, becomes a read
// of the value the forward loop's op drew in this iteration
// (GraphState::RandomReplay). It keeps its control inputs, so in a Cond's
// branch it reads only when the branch runs, as the forward op drew.
void ReplayRandom(GraphState& g, const GraphState::LoopInConstruction& loop, proto::NodeDef* def)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu) {
  if (g.random_replays.empty() || g.random_replays.back()->frame != loop.frame) return;
  GraphState::RandomReplay& r = *g.random_replays.back();
  if (r.next >= r.draws.size()) return;
  const SavedValues& d = r.draws[r.next++];
  if (!d.ok()) return;
  const bool dropout = def->op() == "Dropout";  // the saved value is its mask
  // (A Dropout's T is inferred from its inputs later, so it may be unset here.)
  absl::StatusOr<DataType> want = GetAttrType(*def, dropout ? "T" : "dtype");
  if (want.ok() ? *want != d.dtype : !dropout) return;
  std::vector<std::string> data, control;
  for (const std::string& in : def->input()) (absl::StartsWith(in, "^") ? control : data).push_back(in);
  proto::NodeDef read;
  read.set_op("TensorArrayReadV3");
  read.set_device(def->device());
  for (const NodeOut& in : {d.handle, r.index, d.flow}) read.add_input(Ref(in));
  for (const std::string& c : control) read.add_input(c);
  SetAttrType(&read, "dtype", d.dtype);
  SetAttrShape(&read, "element_shape", d.shape);
  if (!dropout) {
    read.set_name(def->name());
    *def = std::move(read);
    return;
  }
  read.set_name(def->name() + "/replayed_mask");
  absl::StatusOr<const Node*> mask = g.graph.AddNode(read);
  if (!mask.ok()) return;
  def->clear_input();
  for (const std::string& in : data) def->add_input(in);
  def->add_input(read.name());
  for (const std::string& c : control) def->add_input(c);
  def->set_op("DropoutMasked");
  def->clear_attr();
  SetAttrType(def, "T", d.dtype);
}

// In a body a loop's gradient rebuilds: a TensorArray write writes again
// what the forward loop wrote there, which the array allows of a rewrite.
void MarkRewrite(const GraphState& g, proto::NodeDef* def) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu) {
  const std::string& op = def->op();
  if (op != "TensorArrayWriteV3" && op != "TensorArrayScatterV3" && op != "TensorArraySplitV3") return;
  for (const auto& r : g.random_replays) {
    if (absl::StartsWith(def->name(), r->frame + "/")) {
      SetAttrBool(def, "_rewrite", true);
      return;
    }
  }
}

// `inner` over `outer` as nested device scopes merge: every field `inner`
// sets wins. A name that does not parse is kept as written, for the placer
// to report.
std::string MergeDevices(const std::string& outer, const std::string& inner) {
  if (outer.empty()) return inner;
  if (inner.empty()) return outer;
  absl::StatusOr<DeviceName> o = DeviceName::Parse(outer);
  absl::StatusOr<DeviceName> i = DeviceName::Parse(inner);
  if (!o.ok() || !i.ok()) return inner;
  return DeviceName::MergeInner(*o, *i).ToString();
}

}  // namespace

Scope Scope::WithDevice(const std::string& device) const {
  Scope s = *this;
  if (device.empty()) {  // no device: clears what outer scopes set
    s.device_.clear();
    s.device_fn_ = nullptr;
  } else if (device_fn_) {
    s.device_fn_ = [outer = device_fn_, device](const NodeInfo& node) { return MergeDevices(outer(node), device); };
  } else {
    s.device_ = MergeDevices(device_, device);
  }
  return s;
}

Scope Scope::WithDeviceFunction(DeviceFunction fn) const {
  Scope s = *this;
  if (device_fn_ || !device_.empty()) {
    // The function sees the device the outer scopes chose, as the node's device.
    s.device_fn_ = [outer = device_fn_, device = device_, fn = std::move(fn)](const NodeInfo& node) {
      NodeInfo with_outer = node;
      with_outer.device = outer ? outer(node) : device;
      return fn(with_outer);
    };
  } else {
    s.device_fn_ = std::move(fn);
  }
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Operation>& deps) const {
  Scope s = *this;
  s.control_deps_.insert(s.control_deps_.end(), deps.begin(), deps.end());
  return s;
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_deps_.clear();
  return s;
}

absl::Status Scope::status() const {
  absl::MutexLock lock(&graph_->mu);
  return graph_->status;
}

void Scope::UpdateStatus(const absl::Status& s) const {
  if (s.ok()) return;
  absl::MutexLock lock(&graph_->mu);
  if (graph_->status.ok()) graph_->status = s;
}

absl::Status TakeScopeStatus(const Scope& scope) {
  GraphState& g = *scope.graph_state();
  absl::MutexLock lock(&g.mu);
  absl::Status s = std::move(g.status);
  g.status = absl::OkStatus();
  return s;
}

std::string Scope::GetUniqueName(const std::string& base) const {
  std::string full = prefix_.empty() ? base : absl::StrCat(prefix_, "/", base);
  absl::MutexLock lock(&graph_->mu);
  int& count = graph_->name_counts[full];
  std::string name = count == 0 ? full : absl::StrCat(full, "_", count);
  ++count;
  while (graph_->graph.FindNode(name) != nullptr) name = absl::StrCat(full, "_", count++);
  return name;
}

Operation Scope::AddNode(proto::NodeDef def, const std::vector<Output>& inputs) const {
  if (!ok()) return Operation();
  for (const Output& in : inputs) {
    if (!in.ok()) {
      UpdateStatus(absl::InvalidArgumentError(
          absl::StrCat("Cannot add a ", def.op(), " node: one of its inputs is invalid (an earlier op failed)")));
      return Operation();
    }
    if (in.op().graph_state() != graph_) {
      UpdateStatus(absl::InvalidArgumentError(
          absl::StrCat("Cannot add a ", def.op(), " node: input '", in.name(), "' belongs to another graph")));
      return Operation();
    }
    def.add_input(in.name());
  }
  for (const Operation& dep : control_deps_) {
    if (dep.ok()) def.add_input(absl::StrCat("^", dep.name()));
  }
  def.set_name(op_name_.empty() ? GetUniqueName(def.op())
                                : (prefix_.empty() || full_name_ ? op_name_ : absl::StrCat(prefix_, "/", op_name_)));
  if (device_fn_) {
    NodeInfo info;
    info.name = def.name();
    info.op = def.op();
    info.device = def.device();
    if (absl::StatusOr<DataType> dtype = GetAttrType(def, "dtype"); dtype.ok()) info.dtype = *dtype;
    if (absl::StatusOr<PartialShape> shape = GetAttrShape(def, "shape"); shape.ok()) info.shape = *shape;
    def.set_device(device_fn_(info));
  } else if (!device_.empty()) {
    def.set_device(device_);
  }
  absl::MutexLock lock(&graph_->mu);
  if (!op_name_.empty()) {
    // Mark the name used (it may already be, if GetUniqueName made it).
    int& count = graph_->name_counts[def.name()];
    if (count == 0) count = 1;
  }
  GraphState::LoopInConstruction* loop = IsRandomOp(def.op()) ? InnermostLoop(*graph_, def.name()) : nullptr;
  // (A replayed draw stays one of the loop's draws: a loop rebuilt in an
  // enclosing loop's gradient saves it for its own gradient.)
  if (loop != nullptr) ReplayRandom(*graph_, *loop, &def);
  if (!graph_->random_replays.empty()) MarkRewrite(*graph_, &def);
  absl::StatusOr<const Node*> n = graph_->graph.AddNode(std::move(def));
  if (!n.ok()) {
    if (graph_->status.ok()) graph_->status = n.status();
    return Operation();
  }
  if (loop != nullptr) loop->random_ops.push_back(*n);
  return Operation(*n, graph_);
}

void Scope::ToGraphDef(proto::GraphDef* out) const {
  absl::MutexLock lock(&graph_->mu);
  graph_->graph.ToGraphDef(out);
}

void Scope::SetGraphSeed(int64_t seed) const {
  absl::MutexLock lock(&graph_->mu);
  graph_->graph_seed = seed;
}

void Scope::AddInitializer(const Operation& op) const {
  absl::MutexLock lock(&graph_->mu);
  graph_->initializers.push_back(op.node());
}

std::vector<Operation> Scope::Initializers() const {
  absl::MutexLock lock(&graph_->mu);
  std::vector<Operation> out;
  for (const Node* n : graph_->initializers) out.emplace_back(n, graph_);
  return out;
}

void Scope::AddTrainableVariable(const Output& var) const {
  Scope detached = var.scope();
  detached.graph_.reset();
  detached.control_deps_.clear();
  absl::MutexLock lock(&graph_->mu);
  graph_->trainable_variables.push_back(GraphState::Variable{var.node(), var.index(), std::move(detached)});
}

std::vector<Output> Scope::TrainableVariables() const {
  absl::MutexLock lock(&graph_->mu);
  std::vector<Output> out;
  for (const GraphState::Variable& v : graph_->trainable_variables) {
    Scope attached = v.scope;
    attached.graph_ = graph_;
    out.emplace_back(Operation(v.node, graph_), v.index, std::move(attached));
  }
  return out;
}

std::string Operation::name() const { return node_ ? node_->name() : "<invalid>"; }
std::string Operation::op_type() const { return node_ ? node_->op() : ""; }
std::string Operation::device() const { return node_ ? node_->def().device() : ""; }
int Operation::num_outputs() const { return node_ ? node_->num_outputs() : 0; }

int Scope::num_nodes() const {
  absl::MutexLock lock(&graph_->mu);
  return graph_->graph.num_nodes();
}

Operation Scope::FindOperation(const std::string& name) const {
  absl::MutexLock lock(&graph_->mu);
  const Node* node = graph_->graph.FindNode(name);
  return node == nullptr ? Operation() : Operation(node, graph_);
}

std::string Output::name() const { return op_.ok() ? absl::StrCat(op_.name(), ":", index_) : "<invalid>"; }
DataType Output::dtype() const { return op_.ok() ? op_.node()->output_type(index_) : DT_INVALID; }
PartialShape Output::shape() const { return op_.ok() ? op_.node()->output_shape(index_) : PartialShape(); }

}  // namespace distflow
