#include "runtime/executor.h"

#include <atomic>
#include <deque>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/denormal.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "base/timer.h"
#include "kernels/cpu/tensor_array.h"
#include "kernels/kernel_registry.h"
#include "kernels/rendezvous.h"
#include "kernels/resource_mgr.h"
#include "runtime/executor_frames.h"
#include "runtime/executor_plan.h"
#include "runtime/kernel_threads.h"

namespace distflow {

absl::StatusOr<std::shared_ptr<OpKernel>> KernelCache::Get(const Node& node, Device* device) {
  absl::MutexLock lock(&mu_);
  auto it = kernels_.find(node.name());
  if (it != kernels_.end()) return it->second;
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::Global()->CreateKernel(node, device));
  std::shared_ptr<OpKernel> shared(std::move(k));
  kernels_[node.name()] = shared;
  return shared;
}

namespace {

// The step's rendezvous for a _Send or _Recv inside a loop: its keys name
// the frame instance and iteration too, so each iteration's tensor meets the
// same iteration's on the other task (TensorFlow's frame_iter in the key).
// Lives for one kernel call (a _Recv hands its key over synchronously).
class InFrameRendezvous : public Rendezvous {
 public:
  InFrameRendezvous(Rendezvous* base, std::string suffix) : base_(base), suffix_(std::move(suffix)) {}
  absl::Status Send(int64_t step_id, const std::string& key, const Tensor& value) override {
    return base_->Send(step_id, key + suffix_, value);
  }
  void RecvAsync(int64_t step_id, const std::string& key, const std::string& send_task, CancellationManager* cm,
                 DoneCallback done) override {
    base_->RecvAsync(step_id, key + suffix_, send_task, cm, std::move(done));
  }

 private:
  Rendezvous* base_;
  std::string suffix_;
};

}  // namespace

// The plan (executor_plan.h) and what runs it.
struct Executor::Impl : ExecutorPlan {
  ExecutorOptions options;

  // One step's state. Owned by itself (`self`) until it finishes, and by a
  // pending deadline closure, so neither the last node nor the timer can
  // outlive it.
  struct Step {
    const Impl* impl = nullptr;
    std::shared_ptr<Step> self;
    std::vector<Entry> slots;
    std::unique_ptr<std::atomic<int>[]> pending;
    std::unique_ptr<FrameStates> frames;  // the control-flow path only
    std::vector<Tensor> feed_values;
    std::vector<Tensor> fetched;
    CancellationManager own_cm;
    CancellationManager* cm = nullptr;
    Rendezvous* rendezvous = nullptr;
    StepStatsCollector* stats = nullptr;
    int64_t step_id = 0;
    std::atomic<int> outstanding{0};
    std::atomic<int> outward_left{0};                       // outward items not finished (StepOptions::outputs_done)
    std::function<void(std::vector<Tensor>)> outputs_done;  // moved out when called
    bool report_outputs = false;                            // set before the first node runs
    // Bytes the step's outputs hold, against ExecutorOptions::max_step_bytes
    // (null without a limit).
    std::shared_ptr<std::atomic<int64_t>> held;
    Executor::DoneCallback done;
    Timer::Id timer = 0;
    absl::Mutex mu;
    absl::Status status ABSL_GUARDED_BY(mu);
    bool finished ABSL_GUARDED_BY(mu) = false;
    bool deadline_cancelling ABSL_GUARDED_BY(mu) = false;  // the timer is inside StartCancel
    bool finish_after_deadline ABSL_GUARDED_BY(mu) = false;
  };

  // Work (OpKernel::EstimatedWork: about one pass over an element each)
  // below which a kernel runs on whatever thread made it ready, an RPC thread
  // included: a few tens of microseconds, less than handing it to the pool
  // and waking a thread there.
  static constexpr int64_t kInlineWork = 1 << 16;

  // Where a ready node's inputs are: the step's slots, or its iteration's.
  static Entry* InputSlots(Step* s, const TaggedNode& t, const NodeItem& item) {
    return (t.iter != nullptr ? t.iter->slots.data() : s->slots.data()) + item.input_start;
  }

  bool CheapEnoughToInline(Step* s, const TaggedNode& t, const NodeItem& item) const {
    const Entry* in = InputSlots(s, t, item);
    std::vector<TensorShape> shapes;
    shapes.reserve(static_cast<size_t>(item.node->num_inputs()));
    int64_t elements = 0;
    for (int k = 0; k < item.node->num_inputs(); ++k) {
      const Entry& e = in[k];
      if (e.ref != nullptr) {
        // A variable: its declared shape (no lock), if it says.
        absl::StatusOr<TensorShape> declared = e.ref->declared_shape().ToTensorShape();
        if (!declared.ok()) return false;
        shapes.push_back(*std::move(declared));
      } else {
        shapes.push_back(e.val.shape());
      }
      // A variable counts only through the kernel's estimate: a lookup or a
      // sparse update touches a few rows of a large table.
      if (e.ref == nullptr) elements += shapes.back().num_elements();
      if (elements > 64 * kInlineWork) return false;  // not worth asking the kernel
    }
    int64_t work = item.kernel->EstimatedWork(shapes);
    if (work < 0 && item.work_from_values != nullptr) {
      // The shapes do not tell (BroadcastTo's output is its `shape` input's
      // value): the values do.
      std::vector<const Tensor*> values;
      values.reserve(shapes.size());
      for (int k = 0; k < item.node->num_inputs(); ++k) values.push_back(in[k].ref != nullptr ? nullptr : &in[k].val);
      work = item.work_from_values->EstimatedWorkFromValues(values);
    }
    return work >= 0 && work <= kInlineWork;
  }

  void RecordError(Step* s, const NodeItem& item, const absl::Status& st) const {
    absl::Status full = st;
    if (st.code() != absl::StatusCode::kCancelled || !s->cm->IsCancelled()) {
      full = absl::Status(st.code(),
                          absl::StrCat("Node '", item.node->name(), "' (", item.node->op(), "): ", st.message()));
    }
    bool first = false;
    {
      absl::MutexLock lock(&s->mu);
      if (s->status.ok()) {
        s->status = full;
        first = true;
      }
    }
    if (first) s->cm->StartCancel(full);
  }

  // Propagates a finished node's outputs; appends newly ready items.
  void Complete(Step* s, const TaggedNode& t, OpKernelContext* ctx, const absl::Status& st,
                std::vector<TaggedNode>* ready) const {
    const int id = t.id;
    const NodeItem& item = items[static_cast<size_t>(id)];
    if (!st.ok()) {
      RecordError(s, item, st);
      return;
    }
    if (control_flow) {
      CompleteInFrame(s, t, t.dead ? nullptr : ctx, ready);  // a dead transfer ran: its outputs are dead
      return;
    }
    for (int j = 0; j < item.node->num_outputs(); ++j) {
      Entry out{ctx->output(j), ctx->output_ref(j)};
      if (!out.val.IsInitialized() && out.ref == nullptr &&
          (!item.out_slots[static_cast<size_t>(j)].empty() || !item.out_fetches[static_cast<size_t>(j)].empty())) {
        RecordError(s, item, absl::InternalError(absl::StrCat("the kernel produced no value for output ", j)));
        return;
      }
      for (int f : item.out_fetches[static_cast<size_t>(j)]) {
        if (out.ref != nullptr) {
          absl::StatusOr<Tensor> v = out.ref->Read();
          if (!v.ok()) {
            RecordError(s, item, v.status());
            return;
          }
          s->fetched[static_cast<size_t>(f)] = *v;
        } else {
          s->fetched[static_cast<size_t>(f)] = out.val;
        }
      }
      const auto& slots = item.out_slots[static_cast<size_t>(j)];
      for (size_t k = 0; k < slots.size(); ++k) s->slots[static_cast<size_t>(slots[k])] = out;
    }
    for (int j = 0; j < item.node->num_outputs(); ++j) {
      for (int c : item.out_items[static_cast<size_t>(j)]) {
        if (s->pending[c].fetch_sub(1, std::memory_order_acq_rel) == 1) ready->push_back(TaggedNode{c});
      }
    }
    for (int c : item.control_out) {
      if (s->pending[c].fetch_sub(1, std::memory_order_acq_rel) == 1) ready->push_back(TaggedNode{c});
    }
    if (item.outward && s->report_outputs && s->outward_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      OutputsDone(s);
    }
  }

  // Every outward item has finished: hands the fetches over unless a node failed.
  void OutputsDone(Step* s) const {
    {
      absl::MutexLock lock(&s->mu);
      if (!s->status.ok()) return;
    }
    std::vector<Tensor> out = s->fetched;
    for (size_t f = 0; f < fetches.size(); ++f) {
      if (fetches[f].feed >= 0) out[f] = s->feed_values[static_cast<size_t>(fetches[f].feed)];
    }
    std::function<void(std::vector<Tensor>)> fn = std::move(s->outputs_done);
    fn(std::move(out));
  }

  // Complete on the control-flow path: a Switch's unset output, and every
  // output of a dead node (`ctx` null), are dead; the frames deliver the rest.
  void CompleteInFrame(Step* s, const TaggedNode& t, OpKernelContext* ctx, std::vector<TaggedNode>* ready) const {
    const NodeItem& item = items[static_cast<size_t>(t.id)];
    const int n = item.node->num_outputs();
    std::vector<Entry> outs(static_cast<size_t>(n));
    std::vector<bool> dead(static_cast<size_t>(n), true);
    for (int j = 0; ctx != nullptr && j < n; ++j) {
      Entry out{ctx->output(j), ctx->output_ref(j)};
      const bool unset = !out.val.IsInitialized() && out.ref == nullptr;
      const bool used =
          !item.out_slots[static_cast<size_t>(j)].empty() || !item.out_fetches[static_cast<size_t>(j)].empty();
      // A Switch's untaken output, and a _Recv of a dead tensor, are dead.
      if (unset && used && item.kind != CfKind::kSwitch && item.node->op() != "_Recv") {
        RecordError(s, item, absl::InternalError(absl::StrCat("the kernel produced no value for output ", j)));
        return;
      }
      dead[static_cast<size_t>(j)] = unset;
      outs[static_cast<size_t>(j)] = std::move(out);
    }
    for (int j = 0; j < n; ++j) {
      if (dead[static_cast<size_t>(j)]) continue;  // a fetch left empty is reported by Finish
      for (int f : item.out_fetches[static_cast<size_t>(j)]) {
        const Entry& out = outs[static_cast<size_t>(j)];
        if (out.ref != nullptr) {
          absl::StatusOr<Tensor> v = out.ref->Read();
          if (!v.ok()) {
            RecordError(s, item, v.status());
            return;
          }
          s->fetched[static_cast<size_t>(f)] = *v;
        } else {
          s->fetched[static_cast<size_t>(f)] = out.val;
        }
      }
    }
    s->frames->Propagate(t, &outs, dead, ready);
  }

  // Queues ready items. Cheap ones, and expensive ones with little estimated work, stay
  // on this thread. On a thread of ours (`owned`: the inter-op pool or a
  // caller waiting in Run) the first expensive one stays too; everything else
  // goes to the inter-op pool, so threads we do not own (RPC callbacks, async
  // kernel completions) never run long kernels.
  void Schedule(Step* s, const std::vector<TaggedNode>& ready, bool owned, std::deque<TaggedNode>* local) const {
    bool kept_expensive = !owned;
    for (const TaggedNode& t : ready) {
      s->outstanding.fetch_add(1, std::memory_order_relaxed);
      const NodeItem& item = items[static_cast<size_t>(t.id)];
      if (t.dead || !item.expensive || options.inter_op_pool == nullptr || CheapEnoughToInline(s, t, item)) {
        local->push_back(t);
      } else if (!kept_expensive) {
        kept_expensive = true;
        local->push_back(t);
      } else {
        options.inter_op_pool->Schedule([this, s, t] { RunLoop(s, t); });
      }
    }
  }

  void NodeDone(Step* s) const {
    if (s->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) StepDone(s);
  }

  // Every node has finished (or been skipped after an error).
  void StepDone(Step* s) const {
    {
      absl::MutexLock lock(&s->mu);
      if (s->deadline_cancelling) {
        // The deadline closure is cancelling through s->cm; it finishes the
        // step when StartCancel returns, so the caller's cm outlives its use.
        s->finish_after_deadline = true;
        return;
      }
      s->finished = true;
    }
    if (s->timer != 0) DeadlineTimer()->Cancel(s->timer);
    Finish(s);
  }

  void Finish(Step* s) const {
    std::shared_ptr<Step> keep = std::move(s->self);
    if (step_resources && options.device != nullptr) {
      ReleaseStepContainer(options.device->resource_manager(), s->step_id);
    }
    absl::Status status;
    {
      absl::MutexLock lock(&s->mu);
      status = s->status;
    }
    Executor::DoneCallback done = std::move(s->done);
    if (!status.ok()) {
      done(status);
      return;
    }
    for (size_t f = 0; f < fetches.size(); ++f) {
      if (fetches[f].feed >= 0) {
        s->fetched[f] = s->feed_values[static_cast<size_t>(fetches[f].feed)];
      } else if (control_flow && !s->fetched[f].IsInitialized()) {
        const NodeItem& item = items[static_cast<size_t>(fetches[f].item)];
        done(absl::InvalidArgumentError(absl::StrCat("Fetched tensor '", item.node->name(), ":", fetches[f].output,
                                                     "' (", item.node->op(),
                                                     ") is dead: it is on the untaken side of a Switch, so it was "
                                                     "never computed")));
        return;
      }
    }
    done(std::move(s->fetched));
  }

  Timer* DeadlineTimer() const { return options.timer != nullptr ? options.timer : Timer::Global(); }

  // Runs on the timer thread when a step's deadline passes.
  void Deadline(const std::shared_ptr<Step>& s, int64_t timeout_ms) const {
    absl::Status timeout = absl::DeadlineExceededError(
        absl::StrCat("Step ", s->step_id, " timed out after ", timeout_ms, " ms and was cancelled"));
    {
      absl::MutexLock lock(&s->mu);
      if (s->finished) return;
      if (s->status.ok()) s->status = timeout;
      s->deadline_cancelling = true;
    }
    s->cm->StartCancel(timeout);
    bool finish = false;
    {
      absl::MutexLock lock(&s->mu);
      s->deadline_cancelling = false;
      finish = s->finish_after_deadline;
      if (finish) s->finished = true;
    }
    if (finish) Finish(s.get());
  }

  // A traced step's timestamps: wall time through the Env, comparable across tasks.
  static int64_t NowMicros() { return Env::Default()->NowMicros(); }

  static void RecordStats(Step* s, const NodeItem& item, int64_t start_us) {
    s->stats->Record({item.node->name(), item.node->op(), start_us, NowMicros(), item.transfer_key});
  }

  void RunLoop(Step* s, TaggedNode first) const {
    std::deque<TaggedNode> local{first};
    while (!local.empty()) {
      TaggedNode t = local.front();
      local.pop_front();
      Process(s, t, /*owned=*/true, &local);
    }
  }

  void Process(Step* s, const TaggedNode& t, bool owned, std::deque<TaggedNode>* local) const {
    const int id = t.id;
    const NodeItem& item = items[static_cast<size_t>(id)];
    if (s->cm->IsCancelled()) {
      NodeDone(s);
      return;
    }
    if (t.dead && !item.transfer) {
      // A dead node does not run; its inputs are dropped and its outputs dead.
      // (A dead _Send runs, sending "dead", and a dead _Recv runs to take what
      // its _Send sent, as TensorFlow's: every send is received.)
      Entry* in = InputSlots(s, t, item);
      for (int k = 0; k < item.node->num_inputs(); ++k) in[k] = Entry{};
      std::vector<TaggedNode> ready;
      CompleteInFrame(s, t, nullptr, &ready);
      Schedule(s, ready, owned, local);
      NodeDone(s);
      return;
    }
    OpKernelContext::Params p;
    p.device = options.device;
    p.kernel = item.kernel.get();
    p.step_id = s->step_id;
    p.cancellation = s->cm;
    p.rendezvous = s->rendezvous;
    std::optional<InFrameRendezvous> in_frame;
    if (!item.transfer_key.empty() && s->rendezvous != nullptr && t.frame != nullptr && t.frame->parent != nullptr) {
      in_frame.emplace(s->rendezvous, absl::StrCat(";", t.frame->id, ":", t.iter->iter));
      p.rendezvous = &*in_frame;
    }
    p.default_container = options.default_container;
    p.intra_op_pool = options.intra_op_pool;
    if (s->stats != nullptr) p.trace = [stats = s->stats](const NodeExecStats& n) { stats->Record(n); };
    if (options.max_step_bytes > 0) {
      p.step_bytes = s->held;
      p.max_step_bytes = options.max_step_bytes;
    }
    int n = item.node->num_inputs();
    p.inputs.resize(static_cast<size_t>(n));
    p.input_refs.resize(static_cast<size_t>(n));
    Entry* in = InputSlots(s, t, item);
    for (int k = 0; k < n; ++k) {
      Entry e = std::move(in[k]);
      if (t.dead) continue;  // a dead _Send sends no tensor
      if (item.kind == CfKind::kMerge && e.ref == nullptr && !e.val.IsInitialized()) continue;  // not the live input
      if (item.node->input_is_ref(k)) {
        if (e.ref == nullptr) {
          RecordError(s, item, absl::InternalError(absl::StrCat("input ", k, " should be a variable reference")));
          NodeDone(s);
          return;
        }
        p.input_refs[static_cast<size_t>(k)] = std::move(e.ref);
      } else if (e.ref != nullptr && item.kernel->ReadsVariableInputUnderLock(k)) {
        // The kernel reads the variable under its lock (a lookup's rows)
        // instead of holding a snapshot (op_kernel.h).
        p.input_refs[static_cast<size_t>(k)] = std::move(e.ref);
      } else if (e.ref != nullptr) {
        absl::StatusOr<Tensor> v = e.ref->Read();
        if (!v.ok()) {
          RecordError(s, item, v.status());
          NodeDone(s);
          return;
        }
        p.inputs[static_cast<size_t>(k)] = std::move(*v);
      } else {
        p.inputs[static_cast<size_t>(k)] = std::move(e.val);
      }
    }
    const int64_t start_us = s->stats != nullptr ? NowMicros() : 0;
    if (item.async) {
      auto* ctx = new OpKernelContext(std::move(p));
      static_cast<AsyncOpKernel*>(item.kernel.get())->ComputeAsync(ctx, [this, s, t, ctx, start_us](absl::Status st) {
        if (s->stats != nullptr) RecordStats(s, items[static_cast<size_t>(t.id)], start_us);
        std::vector<TaggedNode> ready;
        Complete(s, t, ctx, st, &ready);
        delete ctx;
        // This is the kernel's completion thread: an RPC thread continues
        // with cheap successors only; a thread of ours that may run long
        // kernels (kernel_threads.h: the bulk pool's) keeps the first
        // expensive one too, as an inter-op thread would.
        const bool owned = MayRunLongKernelsHere();
        std::deque<TaggedNode> more;
        Schedule(s, ready, owned, &more);
        NodeDone(s);
        while (!more.empty()) {
          TaggedNode next = more.front();
          more.pop_front();
          Process(s, next, owned, &more);
        }
      });
      return;
    }
    OpKernelContext ctx(std::move(p));
    absl::Status st;
    {
      ScopedFlushDenormal flush;
      st = item.kernel->Compute(&ctx);
    }
    if (s->stats != nullptr) RecordStats(s, item, start_us);
    std::vector<TaggedNode> ready;
    Complete(s, t, &ctx, st, &ready);
    Schedule(s, ready, owned, local);
    NodeDone(s);
  }
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;
int Executor::num_nodes() const { return static_cast<int>(impl_->items.size()); }

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Graph& graph, const ExecutorOptions& options,
                                                           KernelCache* kernels, const std::vector<TensorId>& feeds,
                                                           const std::vector<TensorId>& fetches,
                                                           const std::vector<std::string>& targets) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  RETURN_IF_ERROR(BuildExecutorPlan(graph, options.device, kernels, feeds, fetches, targets, impl.get()));
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

absl::StatusOr<std::vector<Tensor>> Executor::Run(const StepOptions& options,
                                                  const std::vector<Tensor>& feed_values) const {
  absl::Notification finished;
  absl::StatusOr<std::vector<Tensor>> result;
  Start(options, feed_values, /*owned=*/true, [&](absl::StatusOr<std::vector<Tensor>> r) {
    result = std::move(r);
    finished.Notify();
  });
  finished.WaitForNotification();
  return result;
}

void Executor::RunAsync(const StepOptions& options, std::vector<Tensor> feed_values, DoneCallback done) const {
  Start(options, std::move(feed_values), /*owned=*/false, std::move(done));
}

void Executor::Start(const StepOptions& options, std::vector<Tensor> feed_values, bool owned, DoneCallback done) const {
  const Impl& impl = *impl_;
  if (feed_values.size() != impl.feeds.size()) {
    done(absl::InvalidArgumentError(
        absl::StrCat("Expected ", impl.feeds.size(), " feed values, got ", feed_values.size())));
    return;
  }
  for (size_t i = 0; i < feed_values.size(); ++i) {
    const Node* n = impl.feed_nodes[i];
    int idx = impl.feeds[i].index;
    const Tensor& v = feed_values[i];
    std::string name = absl::StrCat(n->name(), ":", idx);
    if (v.dtype() != n->output_type(idx)) {
      done(absl::InvalidArgumentError(absl::StrCat("Cannot feed a ", DataTypeName(v.dtype()), " value for tensor '",
                                                   name, "', which has dtype ", DataTypeName(n->output_type(idx)))));
      return;
    }
    if (!n->output_shape(idx).IsCompatibleWith(v.shape())) {
      done(absl::InvalidArgumentError(absl::StrCat("Cannot feed a value of shape ", v.shape().DebugString(),
                                                   " for tensor '", name, "', which has shape ",
                                                   n->output_shape(idx).DebugString())));
      return;
    }
  }

  auto step = std::make_shared<Impl::Step>();
  Impl::Step* s = step.get();
  s->self = step;
  s->impl = &impl;
  s->step_id = options.step_id;
  if (impl.step_resources && impl.options.device != nullptr) {
    HoldStepContainer(impl.options.device->resource_manager(), s->step_id);
  }
  if (impl.options.max_step_bytes > 0) s->held = std::make_shared<std::atomic<int64_t>>(0);
  s->done = std::move(done);
  s->slots.resize(static_cast<size_t>(impl.total_slots));
  s->fetched.resize(impl.fetches.size());
  s->rendezvous = options.rendezvous ? options.rendezvous : impl.options.rendezvous;
  s->stats = options.stats;
  s->cm = options.cancellation ? options.cancellation : &s->own_cm;
  if (options.outputs_done && impl.num_outward > 0) {
    s->outputs_done = options.outputs_done;
    s->report_outputs = true;
    s->outward_left.store(impl.num_outward);
  }
  std::vector<TaggedNode> ready;
  if (impl.control_flow) {
    s->frames = std::make_unique<FrameStates>(&impl.items, &impl.frames);
    s->frames->StartRoots(impl.root_ready, &ready);
    for (size_t f = 0; f < impl.feed_slots.size(); ++f) {
      for (size_t k = 0; k < impl.feed_slots[f].size(); ++k) {
        s->frames->Feed(impl.feed_items[f][k], impl.feed_slots[f][k], feed_values[f], &ready);
      }
    }
  } else {
    s->pending.reset(new std::atomic<int>[impl.items.size()]);
    for (size_t i = 0; i < impl.items.size(); ++i) s->pending[i].store(impl.items[i].initial_pending);
    for (size_t f = 0; f < impl.feed_slots.size(); ++f) {
      for (int slot : impl.feed_slots[f]) s->slots[static_cast<size_t>(slot)].val = feed_values[f];
      for (int item : impl.feed_items[f]) s->pending[item].fetch_sub(1);
    }
    for (size_t i = 0; i < impl.items.size(); ++i)
      if (s->pending[i].load() == 0) ready.push_back(TaggedNode{static_cast<int>(i)});
  }
  s->feed_values = std::move(feed_values);
  if (ready.empty()) {
    impl.StepDone(s);
    return;
  }
  if (options.timeout_ms > 0) {
    std::shared_ptr<Impl::Step> for_timer = step;
    int64_t timeout_ms = options.timeout_ms;
    s->timer = impl.DeadlineTimer()->After(absl::Milliseconds(timeout_ms),
                                           [&impl, for_timer, timeout_ms] { impl.Deadline(for_timer, timeout_ms); });
  }
  step.reset();  // from here the step owns itself; `s` stays valid until its last node is done
  // This loop holds one extra count so the step cannot finish while it is
  // still scheduling.
  s->outstanding.store(1);
  std::deque<TaggedNode> local;
  impl.Schedule(s, ready, owned, &local);
  while (!local.empty()) {
    TaggedNode t = local.front();
    local.pop_front();
    impl.Process(s, t, owned, &local);
  }
  impl.NodeDone(s);
}

}  // namespace distflow
