#include "placement/partition.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "graph/attr_value.h"
#include "placement/deferred_updates.h"
#include "placement/loop_skeletons.h"
#include "placement/transfer_bundles.h"

namespace distflow {

absl::StatusOr<std::map<std::string, Partition>> PartitionGraph(
    const Graph& graph, const std::vector<const Node*>& nodes, const std::vector<std::string>& placement,
    const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches, const std::vector<std::string>& targets,
    const PartitionOptions& options) {
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
  // Existing transfers, so one tensor crosses to a device once: (src, idx, dst device) -> recv name.
  std::map<std::tuple<std::string, int, std::string>, std::string> recvs;
  // Control tokens, so one set of sources crosses to a device once:
  // (the sources' names, dst device) -> recv name.
  std::map<std::pair<std::string, std::string>, std::string> control_recvs;
  int counter = 0;
  // The _Recv on `dst` of `in` for `consumer`, made (with its _Send) the first time.
  auto data_recv = [&](const NodeOut& in, Partition& dst, const Node* consumer) -> absl::StatusOr<std::string> {
    const std::string& src_dev = placement[static_cast<size_t>(in.node->id())];
    auto key = std::make_tuple(in.node->name(), in.index, dst.device);
    auto it = recvs.find(key);
    if (it != recvs.end()) return it->second;
    std::string edge = absl::StrCat(in.node->name(), ";", in.index, ";", src_dev, ";", dst.device);
    std::string base = absl::StrCat("_xfer", counter++);
    Partition& src = part_of(in.node);
    proto::NodeDef* send = src.graph.add_node();
    send->set_name(base + "_send");
    send->set_op("_Send");
    send->set_device(src.device);
    send->add_input(absl::StrCat(in.node->name(), ":", in.index));
    SetAttrType(send, "T", in.node->output_type(in.index));
    SetAttrString(send, "key", edge);
    // In a loop, sends too run only in iterations that run (not for a
    // loop invariant in the iteration that ends the loop).
    ASSIGN_OR_RETURN(std::string send_frame, loops.RecvControl(consumer, src.device));
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
    ASSIGN_OR_RETURN(std::string in_frame, loops.RecvControl(consumer, dst.device));
    if (!in_frame.empty()) recv->add_input(in_frame);
    return recvs.emplace(key, recv->name()).first->second;
  };
  // The _Recv on `dst` of a token sent after every one of `sources` (all on
  // one other device) ran, for `consumer`.
  auto control_recv = [&](const std::vector<const Node*>& sources, Partition& dst,
                          const Node* consumer) -> absl::StatusOr<std::string> {
    std::vector<std::string> names;
    for (const Node* c : sources) names.push_back(c->name());
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    auto key = std::make_pair(absl::StrJoin(names, ","), dst.device);
    auto it = control_recvs.find(key);
    if (it != control_recvs.end()) return it->second;
    // A control edge crosses as a tiny tensor produced after its sources ran.
    const std::string& src_dev = placement[static_cast<size_t>(sources.front()->id())];
    std::string base = absl::StrCat("_ctrl", counter++);
    std::string edge = absl::StrCat("^", names.size() == 1 ? names.front() : base, ";", src_dev, ";", dst.device);
    Partition& src = part_of(sources.front());
    proto::NodeDef* token = src.graph.add_node();
    token->set_name(base + "_token");
    token->set_op("Const");
    token->set_device(src.device);
    for (const std::string& name : names) token->add_input("^" + name);
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
    ASSIGN_OR_RETURN(std::string in_frame, loops.RecvControl(consumer, dst.device));
    if (!in_frame.empty()) recv->add_input(in_frame);
    return control_recvs.emplace(key, recv->name()).first->second;
  };
  // Without control flow, control edges cross in as few transfers as the
  // data allow: a control source whose output already crosses to the
  // node's device waits on that tensor's _Recv (it arrives only after the
  // source ran), and a node's other control sources on one device cross as
  // one token sent after all of them ran. The optimizers' gate (every update
  // waits for every gradient) otherwise costs a transfer, one RPC each step,
  // per gradient op and update device. With control flow every control edge
  // crosses alone: a loop's frames and dead tensors follow the edge.
  std::map<std::pair<std::string, std::string>, NodeOut> data_crossings;  // (src, dst device) -> a tensor of src
  absl::flat_hash_set<std::pair<std::string, int>> fed;                   // a fed tensor does not wait for its node
  for (const TensorId& f : feeds) fed.insert({f.node, f.index});
  if (!control_flow) {
    for (const Node* n : nodes) {
      const std::string& dst_dev = placement[static_cast<size_t>(n->id())];
      for (int i = 0; i < n->num_inputs(); ++i) {
        const NodeOut& in = n->input(i);
        if (placement[static_cast<size_t>(in.node->id())] != dst_dev && !n->input_is_ref(i) &&
            !fed.contains({in.node->name(), in.index}))
          data_crossings.emplace(std::make_pair(in.node->name(), dst_dev), in);
      }
    }
  }
  // A sink NoOp: a target NoOp that nothing in the step consumes but
  // control edges from other devices (which look through it, below). Its
  // control sources on other devices become targets of their own
  // partitions instead of crossing to it: the master waits for every
  // partition that runs a target, so the step still ends after them.
  // A NoOp whose only consumers are sink NoOps on its device (a train_op's
  // group under the marker NoOp a step runs instead of it, prefetch.h) is
  // one too: nothing in the step waits for it but the step's end.
  const std::set<std::string> target_names(targets.begin(), targets.end());
  absl::flat_hash_set<const Node*> sinks;
  if (!control_flow) {
    absl::flat_hash_map<const Node*, std::vector<const Node*>> local_consumers;
    absl::flat_hash_set<const Node*> data_consumed;
    for (const Node* n : nodes) {
      for (const NodeOut& in : n->inputs()) data_consumed.insert(in.node);
      for (const Node* c : n->control_inputs())
        if (placement[static_cast<size_t>(c->id())] == placement[static_cast<size_t>(n->id())])
          local_consumers[c].push_back(n);
    }
    auto sink_if = [&](const Node* n, bool target) {
      if (n->op() != "NoOp" || data_consumed.contains(n) || sinks.contains(n)) return false;
      auto it = local_consumers.find(n);
      if (it == local_consumers.end()) return target;
      for (const Node* c : it->second)
        if (!sinks.contains(c)) return false;
      return true;
    };
    for (bool grew = true; grew;) {
      grew = false;
      for (const Node* n : nodes) {
        if (sink_if(n, target_names.count(n->name()) != 0)) grew = sinks.insert(n).second || grew;
      }
    }
  }
  auto is_sink_noop = [&](const Node* n) { return sinks.contains(n); };
  // A fed placeholder read on another device is fed there too (a copy of
  // the placeholder in that partition): the value rides with the RunGraph
  // call instead of being fetched back from the feeding partition.
  absl::flat_hash_set<std::pair<std::string, std::string>> fed_copies;  // (placeholder, device)
  auto fed_here = [&](const NodeOut& in, Partition& dst) {
    if (control_flow || in.index != 0 || in.node->op() != "Placeholder" || !fed.contains({in.node->name(), 0})) {
      return false;
    }
    if (fed_copies.insert({in.node->name(), dst.device}).second) {
      proto::NodeDef* copy = dst.graph.add_node();
      *copy = in.node->def();
      copy->set_device(dst.device);
      copy->clear_input();
      dst.feeds.push_back(absl::StrCat(in.node->name(), ":0"));
    }
    return true;
  };
  std::optional<DeferredUpdateEdges> deferral;
  if (options.defer_updates && !control_flow) deferral.emplace(nodes, placement);
  std::vector<const Node*> source_targets;
  for (const Node* n : nodes) {
    Partition& dst = part_of(n);
    proto::NodeDef def = n->def();
    def.set_device(dst.device);
    def.clear_input();
    for (int i = 0; i < n->num_inputs(); ++i) {
      const NodeOut& in = n->input(i);
      const std::string& src_dev = placement[static_cast<size_t>(in.node->id())];
      if (src_dev == dst.device) {
        def.add_input(absl::StrCat(in.node->name(), ":", in.index));
        continue;
      }
      if (fed_here(in, dst)) {
        def.add_input(absl::StrCat(in.node->name(), ":0"));
        continue;
      }
      if (n->input_is_ref(i)) {
        return absl::InternalError(absl::StrCat("Node '", n->name(), "' on ", dst.device, " uses variable '",
                                                in.node->name(), "' on ", src_dev, " by reference"));
      }
      ASSIGN_OR_RETURN(std::string recv, data_recv(in, dst, n));
      def.add_input(recv + ":0");
    }
    // Without control flow a NoOp on another device stands for its inputs:
    // the node waits for them directly, not through a hop to the NoOp's
    // device (a train_op's group, fetched beside the global step).
    std::vector<const Node*> sources;
    std::vector<const Node*> stack(n->control_inputs().rbegin(), n->control_inputs().rend());
    absl::flat_hash_set<const Node*> seen;
    while (!stack.empty()) {
      const Node* c = stack.back();
      stack.pop_back();
      if (!seen.insert(c).second) continue;
      if (!control_flow && c->op() == "NoOp" && placement[static_cast<size_t>(c->id())] != dst.device) {
        for (const NodeOut& in : c->inputs()) stack.push_back(in.node);
        stack.insert(stack.end(), c->control_inputs().rbegin(), c->control_inputs().rend());
        continue;
      }
      sources.push_back(c);
    }
    const bool sink = is_sink_noop(n);
    std::map<std::string, std::vector<const Node*>> crossing;  // src device -> control sources there
    std::set<std::string> waits;                               // control inputs added from other devices
    auto wait_for = [&](const std::string& recv) {
      if (waits.insert(recv).second) def.add_input("^" + recv);
    };
    absl::flat_hash_set<const Node*> stood_in;
    for (const Node* c : sources) {
      const std::string& src_dev = placement[static_cast<size_t>(c->id())];
      std::vector<const Node*> stand_ins;
      if (deferral && src_dev != dst.device && deferral->Defer(n, c, &stand_ins)) {
        // The update runs as a target of its own partition; the node waits
        // for what the update consumes from here.
        source_targets.push_back(c);
        for (const Node* s : stand_ins)
          if (s != n && stood_in.insert(s).second) def.add_input("^" + s->name());
        continue;
      }
      if (src_dev == dst.device) {
        def.add_input("^" + c->name());
        continue;
      }
      if (control_flow) {
        ASSIGN_OR_RETURN(std::string recv, control_recv({c}, dst, n));
        wait_for(recv);
        continue;
      }
      if (sink) {
        source_targets.push_back(c);  // the step waits for c's partition
        continue;
      }
      auto data = data_crossings.find(std::make_pair(c->name(), dst.device));
      if (data != data_crossings.end()) {
        ASSIGN_OR_RETURN(std::string recv, data_recv(data->second, dst, n));
        wait_for(recv);
        continue;
      }
      crossing[src_dev].push_back(c);
    }
    for (const auto& [src_dev, sources] : crossing) {
      ASSIGN_OR_RETURN(std::string recv, control_recv(sources, dst, n));
      wait_for(recv);
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
  absl::flat_hash_set<const Node*> added;
  for (const Node* c : source_targets) {
    if (target_names.count(c->name()) == 0 && added.insert(c).second) part_of(c).targets.push_back(c->name());
  }
  // Tensors between two tasks travel in as few calls as is safe.
  if (!control_flow) BundleTransfers(&parts);
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

namespace {

bool IsVariableOp(const Node* n) { return n->op() == "Variable" || n->op() == "VariableV2"; }

}  // namespace

bool StepAllowsStaleReads(const std::vector<const Node*>& nodes) {
  for (const Node* n : nodes) {
    absl::StatusOr<bool> on = GetAttrBool(n->def(), kPrefetchVariableReadsAttr);
    if (on.ok() && *on) return true;
  }
  return false;
}

int MarkPrefetchableReads(const std::vector<const Node*>& nodes, std::map<std::string, Partition>* parts) {
  // The variables the step updates by reference.
  absl::flat_hash_set<const Node*> updated;
  for (const Node* n : nodes) {
    // FusedApplyAdam (one op for a task's variables) updates each by reference too.
    if (!IsVariableUpdateOp(n->op())) continue;
    for (int i = 0; i < n->num_inputs(); ++i)
      if (n->input_is_ref(i) && IsVariableOp(n->input(i).node)) updated.insert(n->input(i).node);
  }
  if (updated.empty()) return 0;
  // The nodes whose output 0 is such a variable's value: the variable, or an Identity of it.
  absl::flat_hash_set<std::string> reads;
  for (const Node* n : nodes) {
    if (IsVariableOp(n) && updated.contains(n)) reads.insert(n->name());
    if (n->op() == "Identity" && n->num_inputs() == 1 && updated.contains(n->input(0).node)) reads.insert(n->name());
  }
  int marked = 0;
  absl::flat_hash_set<std::string> prefetched;  // their keys
  for (auto& [device, part] : *parts) {
    for (proto::NodeDef& n : *part.graph.mutable_node()) {
      if (n.op() != "_Recv" || n.input_size() != 0 || HasAttr(n, "_control_flow")) continue;
      absl::StatusOr<std::string> key = GetAttrString(n, "key");
      absl::StatusOr<std::string> from = GetAttrString(n, "send_task");
      if (!key.ok() || !from.ok() || *from == part.task) continue;
      // The key of a data edge is "node;index;source device;destination device".
      std::vector<std::string> fields = absl::StrSplit(*key, ';');
      if (fields.size() != 4 || fields[1] != "0" || !reads.contains(fields[0])) continue;
      SetAttrBool(&n, kPrefetchRecvAttr, true);
      prefetched.insert(*key);
      ++marked;
    }
  }
  // A prefetched read is answered by the worker's prefetcher, one receive at
  // a time: it leaves the bundle its task fetches (placement/transfer_bundles.h),
  // and a bundle left with one member is no bundle; a push whose fetch
  // brings a prefetched read is undone whole. A prefetched read that rides
  // with its sender's fetch (pushed) stays there: the prefetcher answers it
  // with the value the previous run's push brought, and this run's comes
  // with the sender's fetch, as without prefetching (no call of its own).
  if (!prefetched.empty()) {
    auto any_prefetched = [&](const absl::StatusOr<std::vector<std::string>>& keys) {
      if (!keys.ok()) return false;
      for (const std::string& k : *keys)
        if (prefetched.contains(k)) return true;
      return false;
    };
    absl::flat_hash_set<std::string> unpushed;
    for (auto& [device, part] : *parts) {
      for (proto::NodeDef& n : *part.graph.mutable_node()) {
        if (n.op() != "_Recv") continue;
        absl::StatusOr<std::vector<std::string>> push = GetAttrStringList(n, "push");
        if (!push.ok() || !any_prefetched(GetAttrStringList(n, "bundle"))) continue;
        unpushed.insert(push->begin(), push->end());
        n.mutable_attr()->erase("push");
      }
    }
    for (auto& [device, part] : *parts) {
      for (proto::NodeDef& n : *part.graph.mutable_node()) {
        if (n.op() != "_Recv" || HasAttr(n, "push")) continue;
        absl::StatusOr<std::string> key = GetAttrString(n, "key");
        if (key.ok() && unpushed.contains(*key)) n.mutable_attr()->erase("pushed");
        absl::StatusOr<std::vector<std::string>> bundle = GetAttrStringList(n, "bundle");
        if (!bundle.ok()) continue;
        std::vector<std::string> kept;
        for (std::string& k : *bundle)
          if (!prefetched.contains(k)) kept.push_back(std::move(k));
        if (!key.ok() || prefetched.contains(*key) || kept.size() < 2) {
          n.mutable_attr()->erase("bundle");
        } else if (kept.size() != bundle->size()) {
          SetAttrStringList(&n, "bundle", kept);
        }
      }
    }
  }
  return marked;
}

}  // namespace distflow
