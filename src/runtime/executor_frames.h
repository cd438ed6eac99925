// Frames and iterations of one step on the executor's control-flow path,
// TensorFlow's dataflow model of loops and conditionals.
//
// Every node runs in a frame instance (the root, or one loop's body entered
// from one iteration of its parent) and an iteration of it; each (frame,
// iteration) has its own input slots and pending counts, so iterations of a
// loop overlap up to the loop's parallel_iterations. A tensor is live or
// dead: a Switch's untaken output is dead, a node with a dead input is dead
// (it does not run; its outputs are dead), and a Merge fires on its first
// live input (dead only when every forward input is dead). Enter moves a
// value into iteration 0 of the child frame (a constant Enter into every
// iteration), NextIteration into the next iteration (a dead one stops
// there), Exit into the parent frame (a dead Exit reaches the parent only
// when the whole frame is done and it never ran live). An iteration is done
// when nothing of it runs or waits in a child frame, and a frame when all its
// Enters arrived and its iterations are done.
//
// Thread-safe: one mutex guards every frame of the step.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/executor_items.h"

namespace distflow {

struct IterState {
  int64_t iter = 0;
  std::vector<Entry> slots;
  std::vector<int> pending;
  std::vector<int> dead;
  int outstanding_ops = 0;     // ready or running nodes
  int outstanding_frames = 0;  // child frames entered from this iteration, not yet done
};

struct FrameState {
  int info = 0;  // index into the static frames
  // Names this frame instance the same way on every task that runs part of
  // the loop: the parent's id, the frame's name and the parent iteration
  // ("" for the root). Transfers inside a loop add it, and the iteration, to
  // their rendezvous keys.
  std::string id;
  FrameState* parent = nullptr;
  IterState* parent_iter = nullptr;
  int64_t first_iter = 0;  // the iteration at iterations.front()
  int64_t last_iter = -1;  // the newest iteration made
  std::deque<std::unique_ptr<IterState>> iterations;
  int pending_enters = 0;
  struct Value {
    int item = 0;
    Entry entry;
    bool dead = false;
  };
  std::vector<Value> loop_invariants;  // constant Enters: given to every iteration
  std::vector<Value> deferred;         // NextIteration outputs waiting for parallel_iterations room
  std::vector<bool> exit_live;         // per FrameInfo::exits: ran live in some iteration
};

// A node ready to run, in its frame and iteration.
struct TaggedNode {
  int id = 0;
  FrameState* frame = nullptr;  // null on the acyclic path
  IterState* iter = nullptr;
  bool dead = false;
};

class FrameStates {
 public:
  FrameStates(const std::vector<NodeItem>* items, const std::vector<FrameInfo>* frames);

  FrameState* root() { return root_.get(); }
  IterState* root_iter() { return root_->iterations.front().get(); }

  // A fed value arrives at input `slot` of root node `item`.
  void Feed(int item, int slot, const Tensor& value, std::vector<TaggedNode>* ready);
  // Root nodes with nothing to wait for, ready at the start.
  void StartRoots(const std::vector<int>& items, std::vector<TaggedNode>* ready);

  // `node` finished: `outputs[j]` is its j-th output, dead if `dead[j]`.
  // Delivers them to the consumers in the right frame and iteration, retires
  // the node from its iteration, and appends nodes that became ready.
  void Propagate(const TaggedNode& node, std::vector<Entry>* outputs, const std::vector<bool>& dead,
                 std::vector<TaggedNode>* ready);

 private:
  using ChildKey = std::tuple<FrameState*, int64_t, int>;

  std::unique_ptr<IterState> NewIteration(const FrameInfo& f, int64_t iter) const;
  IterState* Iteration(FrameState* f, int64_t iter) const;
  FrameState* FindOrCreateChild(FrameState* parent, IterState* parent_iter, int info)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Delivers one output of `item` (all of it, to every consumer) into (f, it).
  void Activate(FrameState* f, IterState* it, int item, std::vector<Entry>* outputs, const std::vector<bool>& dead,
                bool node_dead, std::vector<TaggedNode>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Arrive(FrameState* f, IterState* it, int consumer, int slot, const Entry* value, bool dead,
              std::vector<TaggedNode>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArriveControl(FrameState* f, IterState* it, int consumer, bool dead, std::vector<TaggedNode>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MakeReady(FrameState* f, IterState* it, int consumer, bool dead, std::vector<TaggedNode>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartIteration(FrameState* f, std::vector<TaggedNode>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NextIteration(FrameState* f, int64_t from, int item, Entry value, std::vector<TaggedNode>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retires finished iterations from the front, and the frame when it is done.
  void Cleanup(FrameState* f, std::vector<TaggedNode>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IterationDone(const FrameState* f, const IterState* it) const;

  const std::vector<NodeItem>& items_;
  const std::vector<FrameInfo>& frames_;
  absl::Mutex mu_;
  std::unique_ptr<FrameState> root_;
  absl::flat_hash_map<ChildKey, std::unique_ptr<FrameState>> children_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
