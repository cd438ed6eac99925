#include "client/control_flow_internal.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace cf {

Output Op(const Scope& s, const std::string& op, const std::vector<Output>& in,
          const std::function<void(proto::NodeDef*)>& attrs, int index) {
  return Output(Raw(s, op, in, attrs), index, s.WithOpName(""));
}

absl::Status Fail(const Scope& s, absl::Status st) {
  s.UpdateStatus(st);
  return st;
}

std::string ScopeName(const Scope& s) {
  std::string probe = s.GetUniqueName("x");
  size_t slash = probe.rfind('/');
  return slash == std::string::npos ? std::string("") : probe.substr(0, slash);
}

Output Enter(const Scope& s, const Output& x, const std::string& frame, bool constant, int parallel,
             const PartialShape* invariant) {
  return Op(s, "Enter", {x}, [&](proto::NodeDef* n) {
    SetAttrString(n, "frame_name", frame);
    SetAttrBool(n, "is_constant", constant);
    SetAttrInt(n, "parallel_iterations", parallel);
    if (invariant != nullptr) SetAttrShape(n, "_shape_invariant", *invariant);
  });
}

Operation SaveEachIteration(const IterationArrayBuilder& b, const Output& value, const PartialShape& shape,
                            SavedValues* saved) {
  // Made in the loop's enclosing frame (after its scope's control
  // dependencies: inside an outer loop, a new array every outer iteration).
  Operation ta = Raw(b.outer, "TensorArrayV3", {Const(b.outer, 0)}, [&](proto::NodeDef* n) {
    SetAttrType(n, "dtype", value.dtype());
    SetAttrBool(n, "dynamic_size", true);
    SetAttrBool(n, "clear_after_read", false);
    SetAttrShape(n, "element_shape", shape);
  });
  Output handle(ta, 0, b.outer), flow(ta, 1, b.outer);
  Output h = Enter(b.outer, handle, b.frame, true, b.parallel, nullptr);
  Output f = Enter(b.outer, flow, b.frame, true, b.parallel, nullptr);
  saved->handle = NodeOut{handle.node(), 0};
  saved->flow = NodeOut{flow.node(), 1};
  saved->dtype = value.dtype();
  saved->shape = shape;
  return Raw(b.body, "TensorArrayWriteV3", {h, b.count, value, f});
}

Output ReadSaved(const Scope& s, const SavedValues& saved, const Output& handle, const Output& k, const Output& flow) {
  return Op(s, "TensorArrayReadV3", {handle, k, flow}, [&](proto::NodeDef* n) {
    SetAttrType(n, "dtype", saved.dtype);
    SetAttrShape(n, "element_shape", saved.shape);
  });
}

namespace {

// The Conds of the body around node `name` of loop `frame`, outermost
// first: per Cond the pivot of the branch that holds the node and the other
// branch's. False if a pivot is not found.
bool CondsAround(const GraphState& g, const std::string& frame, const std::string& name,
                 std::vector<std::pair<const Node*, const Node*>>* pivots) ABSL_SHARED_LOCKS_REQUIRED(g.mu) {
  std::vector<std::string> parts = absl::StrSplit(name.substr(frame.size() + 1), '/');
  std::string prefix = frame;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix = absl::StrCat(prefix, "/", parts[i]);
    if (i == 0 || !absl::StartsWith(parts[i], "cond") || (parts[i + 1] != "true" && parts[i + 1] != "false")) {
      continue;
    }
    const std::string other = parts[i + 1] == "true" ? "false" : "true";
    const Node* taken = g.graph.FindNode(absl::StrCat(prefix, "/", parts[i + 1], "/pivot"));
    const Node* not_taken = g.graph.FindNode(absl::StrCat(prefix, "/", other, "/pivot"));
    if (taken == nullptr || not_taken == nullptr) return false;
    pivots->emplace_back(taken, not_taken);
  }
  return true;
}

}  // namespace

std::vector<Operation> SaveValues(const IterationArrayBuilder& b, const std::vector<Output>& values,
                                  std::vector<SavedValues>* saved) {
  const std::shared_ptr<GraphState>& gs = b.outer.graph_state();
  std::vector<Operation> writes;
  for (const Output& value : values) {
    std::vector<std::pair<const Node*, const Node*>> pivots;
    bool found;
    {
      absl::ReaderMutexLock lock(&gs->mu);
      found = CondsAround(*gs, b.frame, value.node()->name(), &pivots);
    }
    saved->emplace_back();
    if (!found) continue;  // not saved: the gradient draws anew
    if (pivots.empty()) {
      writes.push_back(SaveEachIteration(b, value, value.shape(), &saved->back()));
      continue;
    }
    // In a Cond's branch: the write runs when the branch does, and what the
    // loop waits for is a Merge per Cond of the write's flow with a constant
    // of the other branch, one of which is alive every iteration.
    IterationArrayBuilder in_branch = b;
    in_branch.body = b.body.WithControlDependencies({Operation(pivots.back().first, gs)});
    Operation write = SaveEachIteration(in_branch, value, value.shape(), &saved->back());
    Output done(write, 0, b.body);
    const Scope plain = b.body.WithNoControlDependencies();
    for (auto it = pivots.rbegin(); it != pivots.rend(); ++it) {
      Output other = Const(plain.WithControlDependencies({Operation(it->second, gs)}), 0.0f);
      done = Op(plain, "Merge", {done, other});
    }
    writes.push_back(done.op());
  }
  return writes;
}

std::vector<Operation> SaveRandomValues(const IterationArrayBuilder& b, const GraphState::LoopInConstruction& loop,
                                        std::vector<SavedValues>* saved) {
  const std::shared_ptr<GraphState>& gs = b.outer.graph_state();
  std::vector<const Node*> randoms;
  {
    absl::MutexLock lock(&gs->mu);
    randoms = loop.random_ops;
  }
  std::vector<Output> values;
  for (const Node* r : randoms) {
    // A Dropout's draw is its mask (output 1); a replayed one's, its input 1.
    if (r->op() == "DropoutMasked") {
      values.emplace_back(Operation(r->inputs()[1].node, gs), r->inputs()[1].index, b.body);
    } else {
      values.emplace_back(Operation(r, gs), r->op() == "Dropout" ? 1 : 0, b.body);
    }
  }
  return SaveValues(b, values, saved);
}

std::vector<Operation> SaveNestedDraws(const IterationArrayBuilder& b, const GraphState::LoopInConstruction& loop,
                                       std::vector<std::vector<SavedValues>>* handles,
                                       std::vector<std::vector<SavedValues>>* draws) {
  const std::shared_ptr<GraphState>& gs = b.outer.graph_state();
  {
    absl::MutexLock lock(&gs->mu);
    *draws = loop.nested_draws;
  }
  std::vector<Operation> writes;
  for (const std::vector<SavedValues>& arrays : *draws) {
    handles->emplace_back();
    for (const SavedValues& a : arrays) {
      std::vector<SavedValues> one;
      if (a.ok()) {
        // (The registered array's flow is the nested loop's iteration count
        // as it exits: the save waits for the loop, so its writes run.)
        IterationArrayBuilder after = b;
        after.body = b.body.WithControlDependencies({Operation(a.flow.node, gs)});
        std::vector<Operation> w =
            SaveValues(after, {Output(Operation(a.handle.node, gs), a.handle.index, b.body)}, &one);
        writes.insert(writes.end(), w.begin(), w.end());
      }
      handles->back().push_back(one.empty() ? SavedValues() : one[0]);
    }
  }
  return writes;
}

}  // namespace cf
}  // namespace ops
}  // namespace distflow
