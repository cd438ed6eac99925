// The queues of TensorFlow 1's input pipelines (FIFOQueue,
// RandomShuffleQueue, PaddingFIFOQueue): resources of a task's ResourceMgr
// holding tuples of tensors, shared by every op that names them, so a queue
// on a ps task is fed and drained by ops that other tasks' steps run there.
//
// Every operation is an attempt: it completes at once when it can, else it
// is parked and completed later, by whichever call changes the queue, on
// that caller's thread. No thread waits. A parked attempt ends with OK, with
// OutOfRange (dequeue from a closed queue that holds too few elements),
// Cancelled (enqueue to a closed queue, a pending enqueue cancelled by
// Close(true)) or when its step is cancelled. Errors name the queue.
//
// Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/cancellation.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"
#include "kernels/resource_mgr.h"

namespace distflow {

class Queue : public Resource {
 public:
  static constexpr char kTypeName[] = "Queue";
  const char* type_name() const override { return kTypeName; }

  enum class Kind { kFifo, kRandomShuffle, kPadding };
  struct Options {
    std::string name;
    Kind kind = Kind::kFifo;
    std::vector<DataType> dtypes;
    std::vector<PartialShape> shapes;  // empty, or one per component
    int64_t capacity = -1;             // -1: unbounded
    int64_t min_after_dequeue = 0;     // RandomShuffleQueue: kept back until closed
    uint64_t seed = 0;                 // 0: nondeterministic
  };
  using Tuple = std::vector<Tensor>;
  using EnqueueDone = std::function<void(absl::Status)>;
  // The components: one tensor each, batched ([n, ...]) for the *Many forms.
  using DequeueDone = std::function<void(absl::Status, std::vector<Tensor>)>;

  explicit Queue(Options options);
  const Options& options() const { return options_; }
  // InvalidArgument if another op declared the same queue differently.
  absl::Status MatchesOptions(const Options& other) const;

  // Checks a tuple's dtypes and shapes against the queue's (InvalidArgument
  // naming the queue and the component); `batched`: each component's first
  // dimension counts elements, and all must agree.
  absl::Status ValidateTuple(const Tuple& t, bool batched) const;

  // `elements` one tuple each (already validated).
  void Enqueue(const std::shared_ptr<Queue>& self, std::vector<Tuple> elements, CancellationManager* cm,
               EnqueueDone done);
  // n == -1: one element, components unbatched. Otherwise n elements,
  // batched; `up_to`: fewer once the queue is closed (at least one).
  void Dequeue(const std::shared_ptr<Queue>& self, int64_t n, bool up_to, CancellationManager* cm, DequeueDone done);
  // Later enqueues fail; parked dequeues that cannot be met fail with
  // OutOfRange; with cancel_pending_enqueues, parked enqueues fail too.
  void Close(bool cancel_pending_enqueues);
  int64_t Size() const;
  bool IsClosed() const;

  // Splits a batched tuple into elements.
  static std::vector<Tuple> Unbatch(const Tuple& batched);

 private:
  struct Attempt {
    uint64_t id = 0;
    bool enqueue = false;
    std::vector<Tuple> elements;  // enqueue: still to push; dequeue: taken so far
    int64_t n = -1;
    bool up_to = false;
    EnqueueDone enqueue_done;
    DequeueDone dequeue_done;
    CancellationManager* cm = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    absl::Status status;  // set when finished
    std::vector<Tensor> outputs;
  };
  using Finished = std::vector<std::unique_ptr<Attempt>>;

  void Submit(const std::shared_ptr<Queue>& self, std::unique_ptr<Attempt> a);
  // Makes every possible progress; moves finished attempts to `done`.
  void ProcessLocked(Finished* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TryEnqueueLocked(Attempt* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TryDequeueLocked(Attempt* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Tuple TakeOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Batch(const std::vector<Tuple>& elements, std::vector<Tensor>* out) const;
  void Cancel(uint64_t id, absl::Status why);
  static void Finish(Finished done);
  absl::Status ClosedError(absl::string_view what) const;

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Tuple> elements_ ABSL_GUARDED_BY(mu_);
  std::list<std::unique_ptr<Attempt>> enqueues_ ABSL_GUARDED_BY(mu_);
  std::list<std::unique_ptr<Attempt>> dequeues_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancelled_early_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
