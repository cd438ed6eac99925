#include "placement/partition.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "graph/attr_value.h"
#include "placement/loop_skeletons.h"

namespace distflow {

absl::StatusOr<std::map<std::string, Partition>> PartitionGraph(
    const Graph& graph, const std::vector<const Node*>& nodes, const std::vector<std::string>& placement,
    const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches, const std::vector<std::string>& targets) {
  std::map<std::string, Partition> parts;
  auto part_of = [&](const Node* n) -> Partition& {
    const std::string& d = placement[static_cast<size_t>(n->id())];
    Partition& p = parts[d];
    if (p.device.empty()) {
      p.device = d;
      absl::StatusOr<DeviceName> dn = DeviceName::Parse(d);
      p.task = dn.ok() ? dn->AddressSpace().ToString() : d;
    }
    return p;
  };
  auto part_of_device = [&](const std::string& d) -> Partition& {
    Partition& p = parts[d];
    if (p.device.empty()) {
      p.device = d;
      absl::StatusOr<DeviceName> dn = DeviceName::Parse(d);
      p.task = dn.ok() ? dn->AddressSpace().ToString() : d;
    }
    return p;
  };
  // A _Recv feeding a node inside a loop runs in its frame (loop_skeletons.h).
  LoopSkeletons loops(graph, nodes, placement, part_of_device);
  // With control flow in the step, a _Recv may receive a dead tensor: its
  // partition must run on the executor's control-flow path.
  bool control_flow = false;
  for (const Node* n : nodes) {
    const std::string& op = n->op();
    if (op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" || op == "NextIteration") control_flow = true;
  }
  absl::flat_hash_set<std::pair<std::string, int>> fed;
  for (const TensorId& f : feeds) fed.insert({f.node, f.index});
  // Existing transfers, so one tensor crosses to a device once: (src, idx, dst device) -> recv name.
  std::map<std::tuple<std::string, int, std::string>, std::string> recvs;
  std::map<std::pair<std::string, std::string>, std::string> control_recvs;
  int counter = 0;
  for (const Node* n : nodes) {
    Partition& dst = part_of(n);
    proto::NodeDef def = n->def();
    def.set_device(dst.device);
    def.clear_input();
    for (int i = 0; i < n->num_inputs(); ++i) {
      const NodeOut& in = n->input(i);
      const std::string& src_dev = placement[static_cast<size_t>(in.node->id())];
      std::string name = absl::StrCat(in.node->name(), ":", in.index);
      if (src_dev == dst.device) {
        def.add_input(name);
        continue;
      }
      if (n->input_is_ref(i)) {
        return absl::InternalError(absl::StrCat("Node '", n->name(), "' on ", dst.device, " uses variable '",
                                                in.node->name(), "' on ", src_dev, " by reference"));
      }
      auto key = std::make_tuple(in.node->name(), in.index, dst.device);
      auto it = recvs.find(key);
      if (it == recvs.end()) {
        std::string edge = absl::StrCat(in.node->name(), ";", in.index, ";", src_dev, ";", dst.device);
        std::string base = absl::StrCat("_xfer", counter++);
        Partition& src = part_of(in.node);
        proto::NodeDef* send = src.graph.add_node();
        send->set_name(base + "_send");
        send->set_op("_Send");
        send->set_device(src.device);
        send->add_input(name);
        SetAttrType(send, "T", in.node->output_type(in.index));
        SetAttrString(send, "key", edge);
        // In a loop, sends too run only in iterations that run (not for a
        // loop invariant in the iteration that ends the loop).
        ASSIGN_OR_RETURN(std::string send_frame, loops.RecvControl(n, src.device));
        if (!send_frame.empty()) send->add_input(send_frame);
        src.targets.push_back(send->name());
        proto::NodeDef* recv = dst.graph.add_node();
        recv->set_name(base + "_recv");
        recv->set_op("_Recv");
        recv->set_device(dst.device);
        SetAttrType(recv, "tensor_type", in.node->output_type(in.index));
        SetAttrString(recv, "key", edge);
        SetAttrString(recv, "send_task", src.task);
        SetAttrShape(recv, "shape", in.node->output_shape(in.index));
        if (control_flow) SetAttrBool(recv, "_control_flow", true);
        ASSIGN_OR_RETURN(std::string in_frame, loops.RecvControl(n, dst.device));
        if (!in_frame.empty()) recv->add_input(in_frame);
        it = recvs.emplace(key, recv->name()).first;
      }
      def.add_input(it->second + ":0");
    }
    for (const Node* c : n->control_inputs()) {
      const std::string& src_dev = placement[static_cast<size_t>(c->id())];
      if (src_dev == dst.device) {
        def.add_input("^" + c->name());
        continue;
      }
      auto key = std::make_pair(c->name(), dst.device);
      auto it = control_recvs.find(key);
      if (it == control_recvs.end()) {
        // A control edge crosses as a tiny tensor produced after its source ran.
        std::string edge = absl::StrCat("^", c->name(), ";", src_dev, ";", dst.device);
        std::string base = absl::StrCat("_ctrl", counter++);
        Partition& src = part_of(c);
        proto::NodeDef* token = src.graph.add_node();
        token->set_name(base + "_token");
        token->set_op("Const");
        token->set_device(src.device);
        token->add_input("^" + c->name());
        SetAttrTensor(token, "value", Tensor::Scalar<bool>(true));
        SetAttrType(token, "dtype", DT_BOOL);
        proto::NodeDef* send = src.graph.add_node();
        send->set_name(base + "_send");
        send->set_op("_Send");
        send->set_device(src.device);
        send->add_input(token->name());
        SetAttrType(send, "T", DT_BOOL);
        SetAttrString(send, "key", edge);
        src.targets.push_back(send->name());
        proto::NodeDef* recv = dst.graph.add_node();
        recv->set_name(base + "_recv");
        recv->set_op("_Recv");
        recv->set_device(dst.device);
        SetAttrType(recv, "tensor_type", DT_BOOL);
        SetAttrString(recv, "key", edge);
        SetAttrString(recv, "send_task", src.task);
        SetAttrShape(recv, "shape", PartialShape::Scalar());
        if (control_flow) SetAttrBool(recv, "_control_flow", true);
        ASSIGN_OR_RETURN(std::string in_frame, loops.RecvControl(n, dst.device));
        if (!in_frame.empty()) recv->add_input(in_frame);
        it = control_recvs.emplace(key, recv->name()).first;
      }
      def.add_input("^" + it->second);
    }
    *dst.graph.add_node() = std::move(def);
  }
  for (const TensorId& f : feeds) {
    const Node* n = graph.FindNode(f.node);
    part_of(n).feeds.push_back(absl::StrCat(f.node, ":", f.index));
  }
  for (const TensorId& f : fetches) {
    const Node* n = graph.FindNode(f.node);
    part_of(n).fetches.push_back(absl::StrCat(f.node, ":", f.index));
  }
  for (const std::string& t : targets) part_of(graph.FindNode(t)).targets.push_back(t);
  return parts;
}

bool OnlyFeedsOtherPartitions(const Partition& p) {
  if (!p.fetches.empty() || p.graph.node_size() == 0) return false;
  absl::flat_hash_set<std::string> sends;
  for (const proto::NodeDef& n : p.graph.node())
    if (n.op() == "_Send") sends.insert(n.name());
  if (sends.empty()) return false;
  for (const std::string& t : p.targets)
    if (!sends.contains(t)) return false;
  // Every node must be consumed by another node, unless it is a _Send.
  absl::flat_hash_set<std::string> consumed;
  for (const proto::NodeDef& n : p.graph.node()) {
    for (const std::string& in : n.input()) {
      absl::string_view name = in;
      if (!name.empty() && name[0] == '^') name.remove_prefix(1);
      name = name.substr(0, name.find(':'));
      consumed.insert(std::string(name));
    }
  }
  for (const proto::NodeDef& n : p.graph.node())
    if (!consumed.contains(n.name()) && !sends.contains(n.name())) return false;
  return true;
}

}  // namespace distflow
