#include "runtime/executor_frames.h"

#include "absl/strings/str_cat.h"

namespace distflow {

FrameStates::FrameStates(const std::vector<NodeItem>* items, const std::vector<FrameInfo>* frames)
    : items_(*items), frames_(*frames) {
  root_ = std::make_unique<FrameState>();
  root_->info = 0;
  root_->last_iter = 0;
  root_->iterations.push_back(NewIteration(frames_[0], 0));
}

std::unique_ptr<IterState> FrameStates::NewIteration(const FrameInfo& f, int64_t iter) const {
  auto it = std::make_unique<IterState>();
  it->iter = iter;
  it->slots.resize(static_cast<size_t>(f.num_slots));
  it->pending.resize(static_cast<size_t>(f.num_items));
  it->dead.assign(static_cast<size_t>(f.num_items), 0);
  for (int l = 0; l < f.num_items; ++l) {
    it->pending[static_cast<size_t>(l)] = items_[static_cast<size_t>(f.items[static_cast<size_t>(l)])].initial_pending;
  }
  return it;
}

IterState* FrameStates::Iteration(FrameState* f, int64_t iter) const {
  return f->iterations[static_cast<size_t>(iter - f->first_iter)].get();
}

void FrameStates::Feed(int item, int slot, const Tensor& value, std::vector<TaggedNode>* ready) {
  absl::MutexLock lock(&mu_);
  Entry e{value, nullptr};
  Arrive(root_.get(), root_iter(), item, slot, &e, /*dead=*/false, ready);
}

void FrameStates::StartRoots(const std::vector<int>& items, std::vector<TaggedNode>* ready) {
  absl::MutexLock lock(&mu_);
  for (int id : items) MakeReady(root_.get(), root_iter(), id, /*dead=*/false, ready);
}

void FrameStates::MakeReady(FrameState* f, IterState* it, int consumer, bool dead, std::vector<TaggedNode>* ready) {
  ++it->outstanding_ops;
  ready->push_back(TaggedNode{consumer, f, it, dead});
}

void FrameStates::Arrive(FrameState* f, IterState* it, int consumer, int slot, const Entry* value, bool dead,
                         std::vector<TaggedNode>* ready) {
  const NodeItem& c = items_[static_cast<size_t>(consumer)];
  const size_t local = static_cast<size_t>(c.local_id);
  int& pending = it->pending[local];
  if (c.kind == CfKind::kMerge) {
    // Pending's low bit is set until the first live input; the rest counts
    // control inputs twice.
    if (!dead) {
      if ((pending & 1) == 0) return;  // fired already: later live inputs are ignored
      it->slots[static_cast<size_t>(slot)] = *value;
      --pending;
      if (pending == 0) MakeReady(f, it, consumer, false, ready);
    } else {
      ++it->dead[local];
      if (pending == 1 && it->dead[local] == c.merge_forward_inputs) MakeReady(f, it, consumer, true, ready);
    }
    return;
  }
  if (dead) {
    ++it->dead[local];
  } else {
    it->slots[static_cast<size_t>(slot)] = *value;
  }
  if (--pending == 0) MakeReady(f, it, consumer, it->dead[local] > 0 && c.kind != CfKind::kControlTrigger, ready);
}

void FrameStates::ArriveControl(FrameState* f, IterState* it, int consumer, bool dead, std::vector<TaggedNode>* ready) {
  const NodeItem& c = items_[static_cast<size_t>(consumer)];
  const size_t local = static_cast<size_t>(c.local_id);
  int& pending = it->pending[local];
  if (c.kind == CfKind::kMerge) {
    pending -= 2;
    if (pending == 0) {
      MakeReady(f, it, consumer, false, ready);
    } else if (pending == 1 && it->dead[local] == c.merge_forward_inputs) {
      MakeReady(f, it, consumer, true, ready);
    }
    return;
  }
  if (dead) ++it->dead[local];
  if (--pending == 0) MakeReady(f, it, consumer, it->dead[local] > 0 && c.kind != CfKind::kControlTrigger, ready);
}

void FrameStates::Activate(FrameState* f, IterState* it, int item, std::vector<Entry>* outputs,
                           const std::vector<bool>& dead, bool node_dead, std::vector<TaggedNode>* ready) {
  const NodeItem& n = items_[static_cast<size_t>(item)];
  for (size_t j = 0; j < n.out_items.size(); ++j) {
    const std::vector<int>& consumers = n.out_items[j];
    const std::vector<int>& slots = n.out_slots[j];
    const bool d = node_dead || j >= dead.size() || dead[j];
    const Entry* value = d ? nullptr : &(*outputs)[j];
    for (size_t k = 0; k < consumers.size(); ++k) Arrive(f, it, consumers[k], slots[k], value, d, ready);
  }
  for (int c : n.control_out) ArriveControl(f, it, c, node_dead, ready);
}

FrameState* FrameStates::FindOrCreateChild(FrameState* parent, IterState* parent_iter, int info) {
  ChildKey key{parent, parent_iter->iter, info};
  auto found = children_.find(key);
  if (found != children_.end()) return found->second.get();
  const FrameInfo& fi = frames_[static_cast<size_t>(info)];
  auto child = std::make_unique<FrameState>();
  child->info = info;
  child->parent = parent;
  child->parent_iter = parent_iter;
  child->id = absl::StrCat(parent->id, "/", fi.name, "@", parent_iter->iter);
  child->last_iter = 0;
  child->iterations.push_back(NewIteration(fi, 0));
  child->pending_enters = fi.num_enters;
  child->exit_live.assign(fi.exits.size(), false);
  ++parent_iter->outstanding_frames;
  FrameState* raw = child.get();
  children_.emplace(key, std::move(child));
  return raw;
}

void FrameStates::StartIteration(FrameState* f, std::vector<TaggedNode>* ready) {
  f->iterations.push_back(NewIteration(frames_[static_cast<size_t>(f->info)], ++f->last_iter));
  IterState* it = f->iterations.back().get();
  for (FrameState::Value& inv : f->loop_invariants) {
    std::vector<Entry> out{inv.entry};
    Activate(f, it, inv.item, &out, {inv.dead}, inv.dead, ready);
  }
}

void FrameStates::NextIteration(FrameState* f, int64_t from, int item, Entry value, std::vector<TaggedNode>* ready) {
  const int64_t to = from + 1;
  std::vector<Entry> out{std::move(value)};
  if (to <= f->last_iter) {
    Activate(f, Iteration(f, to), item, &out, {false}, false, ready);
    return;
  }
  const int parallel = frames_[static_cast<size_t>(f->info)].parallel_iterations;
  if (static_cast<int>(f->iterations.size()) >= parallel) {
    f->deferred.push_back(FrameState::Value{item, std::move(out[0]), false});
    return;
  }
  StartIteration(f, ready);
  Activate(f, f->iterations.back().get(), item, &out, {false}, false, ready);
}

bool FrameStates::IterationDone(const FrameState* f, const IterState* it) const {
  return it->outstanding_ops == 0 && it->outstanding_frames == 0 && (it->iter > 0 || f->pending_enters == 0);
}

void FrameStates::Cleanup(FrameState* f, std::vector<TaggedNode>* ready) {
  if (f == root_.get()) return;
  while (!f->iterations.empty()) {
    if (!IterationDone(f, f->iterations.front().get())) return;
    f->iterations.pop_front();
    ++f->first_iter;
    if (!f->deferred.empty()) {
      StartIteration(f, ready);
      IterState* it = f->iterations.back().get();
      std::vector<FrameState::Value> deferred = std::move(f->deferred);
      f->deferred.clear();
      for (FrameState::Value& v : deferred) {
        std::vector<Entry> out{std::move(v.entry)};
        Activate(f, it, v.item, &out, {false}, false, ready);
      }
    }
  }
  // The frame is done: exits that never ran live are dead in the parent.
  const FrameInfo& fi = frames_[static_cast<size_t>(f->info)];
  FrameState* parent = f->parent;
  IterState* parent_iter = f->parent_iter;
  for (size_t e = 0; e < fi.exits.size(); ++e) {
    if (f->exit_live[e]) continue;
    std::vector<Entry> none(1);
    Activate(parent, parent_iter, fi.exits[e], &none, {true}, true, ready);
  }
  --parent_iter->outstanding_frames;
  children_.erase(ChildKey{parent, parent_iter->iter, f->info});  // frees f
  Cleanup(parent, ready);
}

void FrameStates::Propagate(const TaggedNode& node, std::vector<Entry>* outputs, const std::vector<bool>& dead,
                            std::vector<TaggedNode>* ready) {
  absl::MutexLock lock(&mu_);
  const NodeItem& n = items_[static_cast<size_t>(node.id)];
  FrameState* f = node.frame;
  IterState* it = node.iter;
  const bool live0 = !node.dead && !dead.empty() && !dead[0];
  switch (n.kind) {
    case CfKind::kEnter: {
      FrameState* child = FindOrCreateChild(f, it, n.child_frame);
      if (n.constant_enter) {
        child->loop_invariants.push_back(FrameState::Value{node.id, live0 ? (*outputs)[0] : Entry{}, !live0});
        for (auto& iter_state : child->iterations) {
          std::vector<Entry> out{child->loop_invariants.back().entry};
          Activate(child, iter_state.get(), node.id, &out, {!live0}, !live0, ready);
        }
      } else {
        Activate(child, Iteration(child, 0), node.id, outputs, dead, node.dead, ready);
      }
      --child->pending_enters;
      Cleanup(child, ready);
      break;
    }
    case CfKind::kExit:
      if (live0) {
        Activate(f->parent, f->parent_iter, node.id, outputs, dead, false, ready);
        const std::vector<int>& exits = frames_[static_cast<size_t>(f->info)].exits;
        for (size_t e = 0; e < exits.size(); ++e) {
          if (exits[e] == node.id) f->exit_live[e] = true;
        }
      }
      break;
    case CfKind::kNextIteration:
      if (live0) NextIteration(f, it->iter, node.id, std::move((*outputs)[0]), ready);
      break;
    default:
      Activate(f, it, node.id, outputs, dead, node.dead, ready);
  }
  --it->outstanding_ops;
  Cleanup(f, ready);
}

}  // namespace distflow
