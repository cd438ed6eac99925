#include "runtime/control_flow_info.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

CfKind KindOf(const std::string& op) {
  if (op == "Switch") return CfKind::kSwitch;
  if (op == "Merge") return CfKind::kMerge;
  if (op == "Enter") return CfKind::kEnter;
  if (op == "Exit") return CfKind::kExit;
  if (op == "NextIteration") return CfKind::kNextIteration;
  if (op == "ControlTrigger") return CfKind::kControlTrigger;
  return CfKind::kNone;
}

bool IsBackEdge(const Node& dst, const Node& src) { return dst.op() == "Merge" && src.op() == "NextIteration"; }

std::string FrameLabel(const std::vector<FrameInfo>& frames, int f) {
  return f == 0 ? std::string("the root frame")
                : absl::StrCat("loop frame '", frames[static_cast<size_t>(f)].name, "'");
}

absl::Status NodeError(const Node& n, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("Node '", n.name(), "' (", n.op(), "): ", msg));
}

// Assigns every node of the graph a frame (errors only matter for the nodes
// the step runs, so they are kept per node).
struct FrameAssignment {
  std::vector<int> frame_of;
  std::vector<std::string> error_of;
  absl::flat_hash_map<std::string, int> frame_ids;
};

// The frame a node's outputs go to.
int OutputFrame(const Node& n, const FrameAssignment& a, const std::vector<FrameInfo>& frames) {
  int f = a.frame_of[static_cast<size_t>(n.id())];
  if (n.op() == "Enter") {
    absl::StatusOr<std::string> name = GetAttrString(n.def(), "frame_name");
    auto it = a.frame_ids.find(name.ok() ? *name : "");
    return it == a.frame_ids.end() ? f : it->second;
  }
  if (n.op() == "Exit") return f == 0 ? 0 : frames[static_cast<size_t>(f)].parent;
  return f;
}

FrameAssignment AssignFrames(const Graph& graph, std::vector<FrameInfo>* frames) {
  FrameAssignment a;
  a.frame_of.assign(static_cast<size_t>(graph.num_nodes()), 0);
  a.error_of.resize(static_cast<size_t>(graph.num_nodes()));
  for (const auto& node : graph.nodes()) {
    const Node& n = *node;
    int frame = -1;
    std::string first_src;
    auto consider = [&](const Node& src) {
      if (IsBackEdge(n, src)) return;
      int f = OutputFrame(src, a, *frames);
      if (frame < 0) {
        frame = f;
        first_src = src.name();
      } else if (f != frame && a.error_of[static_cast<size_t>(n.id())].empty()) {
        a.error_of[static_cast<size_t>(n.id())] =
            absl::StrCat("its inputs come from different frames: '", first_src, "' from ", FrameLabel(*frames, frame),
                         ", '", src.name(), "' from ", FrameLabel(*frames, f),
                         " (a value used inside a loop must enter it through an Enter node)");
      }
    };
    for (const NodeOut& in : n.inputs()) consider(*in.node);
    for (const Node* c : n.control_inputs()) consider(*c);
    if (frame < 0) frame = 0;
    a.frame_of[static_cast<size_t>(n.id())] = frame;
    if (n.op() == "Enter") {
      absl::StatusOr<std::string> name = GetAttrString(n.def(), "frame_name");
      std::string fname = name.ok() ? *name : "";
      auto it = a.frame_ids.find(fname);
      if (it == a.frame_ids.end()) {
        FrameInfo info;
        info.name = fname;
        info.parent = frame;
        absl::StatusOr<int64_t> p = GetAttrInt(n.def(), "parallel_iterations");
        info.parallel_iterations = p.ok() ? static_cast<int>(std::max<int64_t>(1, *p)) : 10;
        a.frame_ids[fname] = static_cast<int>(frames->size());
        frames->push_back(std::move(info));
      } else if ((*frames)[static_cast<size_t>(it->second)].parent != frame) {
        a.error_of[static_cast<size_t>(n.id())] =
            absl::StrCat("it enters loop frame '", fname, "' from ", FrameLabel(*frames, frame),
                         ", but other Enter nodes enter it from ",
                         FrameLabel(*frames, (*frames)[static_cast<size_t>(it->second)].parent));
      }
    }
    if ((n.op() == "Exit" || n.op() == "NextIteration") && frame == 0 &&
        a.error_of[static_cast<size_t>(n.id())].empty()) {
      a.error_of[static_cast<size_t>(n.id())] =
          "it is not inside a while loop (its input does not come through an Enter node)";
    }
  }
  return a;
}

}  // namespace

bool NeedsControlFlow(const std::vector<NodeItem>& items) {
  for (const NodeItem& item : items) {
    if (KindOf(item.node->op()) != CfKind::kNone || item.node->op() == "LoopCond") return true;
    // A _Recv from a step with control flow may receive a dead tensor.
    if (item.node->op() == "_Recv") {
      absl::StatusOr<bool> cf = GetAttrBool(item.node->def(), "_control_flow");
      if (cf.ok() && *cf) return true;
    }
  }
  return false;
}

absl::Status BuildControlFlowInfo(const Graph& graph, const std::vector<const Node*>& roots,
                                  std::vector<NodeItem>* items, std::vector<FrameInfo>* frames) {
  frames->clear();
  frames->emplace_back();  // the root
  FrameAssignment a = AssignFrames(graph, frames);
  absl::flat_hash_map<const Node*, int> item_of;
  for (size_t i = 0; i < items->size(); ++i) item_of[(*items)[i].node] = static_cast<int>(i);
  for (size_t i = 0; i < items->size(); ++i) {
    NodeItem& item = (*items)[i];
    const Node& n = *item.node;
    if (!a.error_of[static_cast<size_t>(n.id())].empty()) return NodeError(n, a.error_of[static_cast<size_t>(n.id())]);
    item.kind = KindOf(n.op());
    item.frame = a.frame_of[static_cast<size_t>(n.id())];
    FrameInfo& f = (*frames)[static_cast<size_t>(item.frame)];
    item.local_id = f.num_items++;
    f.items.push_back(static_cast<int>(i));
    item.input_start = f.num_slots;
    f.num_slots += n.num_inputs();
    for (const NodeOut& in : n.inputs()) {
      // A fed tensor enters wherever its node would have put it.
      if (!item_of.contains(in.node) && OutputFrame(*in.node, a, *frames) != 0) {
        return NodeError(n, absl::StrCat("its input '", in.node->name(), ":", in.index, "' is fed, but it is inside ",
                                         FrameLabel(*frames, item.frame), "; only tensors outside loops can be fed"));
      }
    }
    switch (item.kind) {
      case CfKind::kEnter: {
        item.child_frame = OutputFrame(n, a, *frames);
        absl::StatusOr<bool> c = GetAttrBool(n.def(), "is_constant");
        item.constant_enter = c.ok() && *c;
        ++(*frames)[static_cast<size_t>(item.child_frame)].num_enters;
        break;
      }
      case CfKind::kExit:
        f.exits.push_back(static_cast<int>(i));
        break;
      case CfKind::kMerge:
        for (const NodeOut& in : n.inputs()) item.merge_forward_inputs += IsBackEdge(n, *in.node) ? 0 : 1;
        break;
      default:
        break;
    }
  }
  for (const Node* r : roots) {
    int f = OutputFrame(*r, a, *frames);
    // A partition's _Send inside a loop (the body spans tasks) runs every iteration.
    if (f != 0 && r->op() != "_Send") {
      return NodeError(*r, absl::StrCat("cannot be fetched or run as a target: it is inside ", FrameLabel(*frames, f),
                                        "; fetch the loop's Exit outputs instead"));
    }
  }
  return absl::OkStatus();
}

}  // namespace distflow
