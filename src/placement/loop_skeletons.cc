#include "placement/loop_skeletons.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "graph/attr_value.h"

namespace distflow {

LoopSkeletons::LoopSkeletons(const Graph& graph, const std::vector<const Node*>& nodes,
                             const std::vector<std::string>& placement, PartitionOf part_of)
    : placement_(placement), part_of_(std::move(part_of)) {
  frames_.push_back(Frame{});
  run_frame_.assign(static_cast<size_t>(graph.num_nodes()), 0);
  std::vector<int> out_frame(static_cast<size_t>(graph.num_nodes()), 0);
  std::map<std::pair<int, std::string>, int> children;
  std::vector<const Node*> sorted = nodes;
  // Ids follow creation: a node's first input comes before it (a Merge's
  // back edge is its second input), so one pass in id order sees it first.
  std::sort(sorted.begin(), sorted.end(), [](const Node* a, const Node* b) { return a->id() < b->id(); });
  for (const Node* n : sorted) {
    const Node* first =
        n->num_inputs() > 0 ? n->input(0).node : (n->control_inputs().empty() ? nullptr : n->control_inputs()[0]);
    const int rf = first == nullptr ? 0 : out_frame[static_cast<size_t>(first->id())];
    run_frame_[static_cast<size_t>(n->id())] = rf;
    int of = rf;
    if (n->op() == "Enter") {
      absl::StatusOr<std::string> name = GetAttrString(n->def(), "frame_name");
      auto key = std::make_pair(rf, name.ok() ? *name : std::string());
      auto it = children.find(key);
      if (it == children.end()) {
        Frame f;
        f.name = key.second;
        f.parent = rf;
        absl::StatusOr<int64_t> p = GetAttrInt(n->def(), "parallel_iterations");
        if (p.ok()) f.parallel_iterations = *p;
        frames_.push_back(f);
        it = children.emplace(key, static_cast<int>(frames_.size()) - 1).first;
      }
      of = it->second;
    } else if (n->op() == "Exit") {
      of = frames_[static_cast<size_t>(rf)].parent;
    } else if (n->op() == "LoopCond") {
      frames_[static_cast<size_t>(rf)].loop_cond = n;
    }
    out_frame[static_cast<size_t>(n->id())] = of;
  }
}

absl::StatusOr<std::string> LoopSkeletons::RecvControl(const Node* consumer, const std::string& device) {
  const int f = run_frame_[static_cast<size_t>(consumer->id())];
  if (f == 0) return std::string();
  ASSIGN_OR_RETURN(std::string pivot, Pivot(f, device));
  return "^" + pivot;
}

namespace {

proto::NodeDef* AddBoolNode(Partition& p, const std::string& name, const std::string& op,
                            const std::vector<std::string>& inputs) {
  proto::NodeDef* n = p.graph.add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device(p.device);
  for (const std::string& in : inputs) n->add_input(in);
  if (op != "Const" && op != "_Recv" && op != "_Send") SetAttrType(n, "T", DT_BOOL);
  return n;
}

std::string TaskOf(const std::string& device) {
  absl::StatusOr<DeviceName> dn = DeviceName::Parse(device);
  return dn.ok() ? dn->AddressSpace().ToString() : device;
}

}  // namespace

absl::StatusOr<std::string> LoopSkeletons::Pivot(int f, const std::string& device) {
  auto found = pivots_.find({f, device});
  if (found != pivots_.end()) return found->second;
  const Frame& frame = frames_[static_cast<size_t>(f)];
  if (frame.loop_cond == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Loop frame '", frame.name, "' has nodes on ", device, " but no LoopCond in this step's graph"));
  }
  std::string src;
  Partition& p = part_of_(device);
  const std::string base = absl::StrCat("_loop", counter_++, "_", frame.name);
  if (frame.parent == 0) {
    proto::NodeDef* c = AddBoolNode(p, base + "/src", "Const", {});
    SetAttrTensor(c, "value", Tensor::Scalar<bool>(true));
    SetAttrType(c, "dtype", DT_BOOL);
    src = c->name();
  } else {
    ASSIGN_OR_RETURN(std::string outer, Pivot(frame.parent, device));
    src = outer;
  }
  proto::NodeDef* enter = AddBoolNode(p, base + "/enter", "Enter", {src});
  SetAttrString(enter, "frame_name", frame.name);
  SetAttrBool(enter, "is_constant", false);
  SetAttrInt(enter, "parallel_iterations", frame.parallel_iterations);
  proto::NodeDef* merge = AddBoolNode(p, base + "/merge", "Merge", {enter->name(), base + "/next"});
  SetAttrInt(merge, "N", 2);
  // The loop's condition, every iteration: local, or sent from its device.
  const std::string& cond_dev = placement_[static_cast<size_t>(frame.loop_cond->id())];
  std::string cond = frame.loop_cond->name() + ":0";
  if (cond_dev != device) {
    const std::string key = absl::StrCat("loop_cond;", frame.loop_cond->name(), ";", cond_dev, ";", device);
    Partition& cp = part_of_(cond_dev);
    proto::NodeDef* send = AddBoolNode(cp, base + "/cond_send", "_Send", {cond});
    SetAttrType(send, "T", DT_BOOL);
    SetAttrString(send, "key", key);
    cp.targets.push_back(send->name());
    proto::NodeDef* recv = AddBoolNode(part_of_(device), base + "/cond_recv", "_Recv", {"^" + merge->name()});
    SetAttrType(recv, "tensor_type", DT_BOOL);
    SetAttrString(recv, "key", key);
    SetAttrString(recv, "send_task", TaskOf(cond_dev));
    SetAttrShape(recv, "shape", PartialShape::Scalar());
    cond = recv->name();
  }
  Partition& q = part_of_(device);  // part_of_ may have added a partition
  AddBoolNode(q, base + "/switch", "Switch", {base + "/merge", cond});
  AddBoolNode(q, base + "/pivot", "Identity", {base + "/switch:1"});
  AddBoolNode(q, base + "/next", "NextIteration", {base + "/pivot"});
  pivots_[{f, device}] = base + "/pivot";
  return base + "/pivot";
}

}  // namespace distflow
