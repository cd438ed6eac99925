#include "kernels/cpu/queue.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace distflow {
namespace {

std::string ShapesString(const std::vector<PartialShape>& shapes) {
  std::vector<std::string> s;
  for (const PartialShape& p : shapes) s.push_back(p.DebugString());
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

std::string TypesString(const std::vector<DataType>& types) {
  std::vector<std::string> s;
  for (DataType t : types) s.push_back(DataTypeName(t));
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

// Copies `src` into row `row` of `dst` ([n, ...]), padding with zeros (or
// empty strings) where `src` is smaller than a row in some dimension.
void CopyIntoRow(const Tensor& src, Tensor* dst, int64_t row) {
  const int rank = src.dims();
  std::vector<int64_t> row_dims(dst->shape().dim_sizes().begin() + 1, dst->shape().dim_sizes().end());
  int64_t row_elems = 1;
  for (int64_t d : row_dims) row_elems *= d;
  VisitDataType(src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto in = src.flat<T>();
    auto out = dst->flat<T>();
    T* base = out.data() + row * row_elems;
    if (src.shape().dim_sizes() == absl::Span<const int64_t>(row_dims)) {
      std::copy(in.begin(), in.end(), base);
      return;
    }
    // Padding: walk the source's elements, mapping each index into the row.
    std::fill(base, base + row_elems, T());
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (int64_t e = 0; e < src.NumElements(); ++e) {
      int64_t off = 0;
      for (int k = 0; k < rank; ++k) off = off * row_dims[static_cast<size_t>(k)] + idx[static_cast<size_t>(k)];
      base[off] = in[static_cast<size_t>(e)];
      for (int k = rank - 1; k >= 0; --k) {
        if (++idx[static_cast<size_t>(k)] < src.dim_size(k)) break;
        idx[static_cast<size_t>(k)] = 0;
      }
    }
  });
}

}  // namespace

Queue::Queue(Options options) : options_(std::move(options)) {
  if (options_.seed != 0) {
    rng_.seed(options_.seed);
  } else {
    rng_.seed(std::random_device()());
  }
}

absl::Status Queue::MatchesOptions(const Options& o) const {
  if (o.kind != options_.kind || o.dtypes != options_.dtypes || o.capacity != options_.capacity ||
      !(o.shapes == options_.shapes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Queue '", options_.name, "' exists with component types ", TypesString(options_.dtypes),
                     ", shapes ", ShapesString(options_.shapes), " and capacity ", options_.capacity,
                     "; an op declares it with ", TypesString(o.dtypes), ", ", ShapesString(o.shapes), " and ",
                     o.capacity, ". Give the second queue another shared_name."));
  }
  return absl::OkStatus();
}

absl::Status Queue::ValidateTuple(const Tuple& t, bool batched) const {
  if (t.size() != options_.dtypes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Queue '", options_.name, "' holds tuples of ",
                                                   options_.dtypes.size(), " components, got ", t.size()));
  }
  int64_t n = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].dtype() != options_.dtypes[i]) {
      return absl::InvalidArgumentError(absl::StrCat("Queue '", options_.name, "': component ", i, " has dtype ",
                                                     DataTypeName(t[i].dtype()), ", the queue holds ",
                                                     DataTypeName(options_.dtypes[i])));
    }
    PartialShape element(t[i].shape());
    if (batched) {
      if (t[i].dims() == 0) {
        return absl::InvalidArgumentError(absl::StrCat("Queue '", options_.name, "': enqueue_many's component ", i,
                                                       " is a scalar; it needs a first dimension of elements"));
      }
      if (n >= 0 && t[i].dim_size(0) != n) {
        return absl::InvalidArgumentError(absl::StrCat("Queue '", options_.name, "': enqueue_many's components ",
                                                       "hold different numbers of elements (", n, " and ",
                                                       t[i].dim_size(0), " in component ", i, ")"));
      }
      n = t[i].dim_size(0);
      element = PartialShape(t[i].shape().dim_sizes().subspan(1));
    }
    if (!options_.shapes.empty() && !options_.shapes[i].IsCompatibleWith(element)) {
      return absl::InvalidArgumentError(absl::StrCat("Queue '", options_.name, "': component ", i, " has shape ",
                                                     element.DebugString(), ", the queue holds ",
                                                     options_.shapes[i].DebugString()));
    }
  }
  return absl::OkStatus();
}

std::vector<Queue::Tuple> Queue::Unbatch(const Tuple& batched) {
  std::vector<Tuple> out;
  const int64_t n = batched.empty() ? 0 : batched[0].dim_size(0);
  for (int64_t i = 0; i < n; ++i) {
    Tuple t;
    for (const Tensor& c : batched) {
      Tensor row = c.Slice(i, i + 1);
      absl::StatusOr<Tensor> r = row.Reshaped(TensorShape(c.shape().dim_sizes().subspan(1)));
      // A queue keeps elements for long: copy them out of the batch's buffer.
      t.push_back(r->DeepCopy());
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status Queue::ClosedError(absl::string_view what) const {
  return absl::CancelledError(absl::StrCat("Queue '", options_.name, "' is closed: ", what));
}

void Queue::Enqueue(const std::shared_ptr<Queue>& self, std::vector<Tuple> elements, CancellationManager* cm,
                    EnqueueDone done) {
  auto a = std::make_unique<Attempt>();
  a->enqueue = true;
  a->elements = std::move(elements);
  a->enqueue_done = std::move(done);
  a->cm = cm;
  Submit(self, std::move(a));
}

void Queue::Dequeue(const std::shared_ptr<Queue>& self, int64_t n, bool up_to, CancellationManager* cm,
                    DequeueDone done) {
  auto a = std::make_unique<Attempt>();
  a->n = n;
  a->up_to = up_to;
  a->dequeue_done = std::move(done);
  a->cm = cm;
  Submit(self, std::move(a));
}

void Queue::Submit(const std::shared_ptr<Queue>& self, std::unique_ptr<Attempt> a) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
  }
  a->id = id;
  // Registered before the attempt is parked, so a cancellation can never
  // miss it; one that comes first is remembered by id.
  if (a->cm != nullptr) {
    a->token = a->cm->Register([self, id, cm = a->cm] {
      absl::Status why = cm->reason();
      self->Cancel(id, why.ok() ? absl::CancelledError("The step was cancelled") : why);
    });
    if (a->token == CancellationManager::kInvalidToken) {
      absl::Status why = a->cm->reason();
      a->status = why.ok() ? absl::CancelledError("The step was cancelled") : why;
      a->cm = nullptr;
      Finished f;
      f.push_back(std::move(a));
      Finish(std::move(f));
      return;
    }
  }
  Finished done;
  {
    absl::MutexLock lock(&mu_);
    auto early = std::find(cancelled_early_.begin(), cancelled_early_.end(), id);
    if (early != cancelled_early_.end()) {
      cancelled_early_.erase(early);
      a->status = absl::CancelledError(absl::StrCat("Queue '", options_.name, "': the step was cancelled"));
      done.push_back(std::move(a));
    } else if (a->enqueue && closed_) {
      a->status = ClosedError("cannot enqueue");
      done.push_back(std::move(a));
    } else {
      (a->enqueue ? enqueues_ : dequeues_).push_back(std::move(a));
      ProcessLocked(&done);
    }
  }
  Finish(std::move(done));
}

void Queue::Cancel(uint64_t id, absl::Status why) {
  Finished done;
  {
    absl::MutexLock lock(&mu_);
    bool found = false;
    for (auto* list : {&enqueues_, &dequeues_}) {
      for (auto it = list->begin(); it != list->end(); ++it) {
        if ((*it)->id != id) continue;
        std::unique_ptr<Attempt> a = std::move(*it);
        list->erase(it);
        // A dequeue's elements taken so far go back to the front.
        if (!a->enqueue) {
          for (auto e = a->elements.rbegin(); e != a->elements.rend(); ++e) elements_.push_front(std::move(*e));
        }
        a->cm = nullptr;  // the manager is running this callback
        a->status = why;
        done.push_back(std::move(a));
        found = true;
        break;
      }
      if (found) break;
    }
    if (!found) cancelled_early_.push_back(id);
    if (found) ProcessLocked(&done);
  }
  Finish(std::move(done));
}

void Queue::Finish(Finished done) {
  for (std::unique_ptr<Attempt>& a : done) {
    if (a->cm != nullptr) a->cm->Deregister(a->token);
    if (a->enqueue) {
      a->enqueue_done(a->status);
    } else {
      a->dequeue_done(a->status, std::move(a->outputs));
    }
  }
}

void Queue::ProcessLocked(Finished* done) {
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto* list : {&enqueues_, &dequeues_}) {
      while (!list->empty()) {
        const size_t before = elements_.size();
        Attempt* a = list->front().get();
        const bool finished = a->enqueue ? TryEnqueueLocked(a) : TryDequeueLocked(a);
        if (elements_.size() != before) progress = true;
        if (!finished) break;
        done->push_back(std::move(list->front()));
        list->pop_front();
        progress = true;
      }
    }
  }
}

bool Queue::TryEnqueueLocked(Attempt* a) {
  size_t pushed = 0;
  while (pushed < a->elements.size() &&
         (options_.capacity < 0 || static_cast<int64_t>(elements_.size()) < options_.capacity)) {
    elements_.push_back(std::move(a->elements[pushed++]));
  }
  a->elements.erase(a->elements.begin(), a->elements.begin() + static_cast<ptrdiff_t>(pushed));
  return a->elements.empty();
}

Queue::Tuple Queue::TakeOneLocked() {
  if (options_.kind == Kind::kRandomShuffle && elements_.size() > 1) {
    std::uniform_int_distribution<size_t> pick(0, elements_.size() - 1);
    std::swap(elements_[pick(rng_)], elements_.back());
    Tuple t = std::move(elements_.back());
    elements_.pop_back();
    return t;
  }
  Tuple t = std::move(elements_.front());
  elements_.pop_front();
  return t;
}

bool Queue::TryDequeueLocked(Attempt* a) {
  const int64_t want = a->n < 0 ? 1 : a->n;
  const int64_t keep = options_.kind == Kind::kRandomShuffle && !closed_ ? options_.min_after_dequeue : 0;
  while (static_cast<int64_t>(a->elements.size()) < want && static_cast<int64_t>(elements_.size()) > keep) {
    a->elements.push_back(TakeOneLocked());
  }
  const int64_t got = static_cast<int64_t>(a->elements.size());
  if (got < want) {
    // Closed: what the queue holds and its parked enqueues bring is all
    // there will be.
    if (!closed_ || !enqueues_.empty()) return false;
    if (!(a->up_to && got > 0)) {
      for (auto e = a->elements.rbegin(); e != a->elements.rend(); ++e) elements_.push_front(std::move(*e));
      a->elements.clear();
      a->status = absl::OutOfRangeError(absl::StrCat("Queue '", options_.name,
                                                     "' is closed and has insufficient "
                                                     "elements (requested ",
                                                     want, ", current size ", elements_.size(), ")"));
      return true;
    }
  }
  if (a->n < 0) {
    a->outputs = std::move(a->elements[0]);
  } else {
    a->status = Batch(a->elements, &a->outputs);
  }
  a->elements.clear();
  return true;
}

absl::Status Queue::Batch(const std::vector<Tuple>& elements, std::vector<Tensor>* out) const {
  out->clear();
  const int64_t n = static_cast<int64_t>(elements.size());
  for (size_t c = 0; c < options_.dtypes.size(); ++c) {
    // The batch's element shape: the elements' shape, or for a padding
    // queue the largest of each dimension.
    std::vector<int64_t> dims;
    if (n > 0) dims.assign(elements[0][c].shape().dim_sizes().begin(), elements[0][c].shape().dim_sizes().end());
    for (int64_t i = 1; i < n; ++i) {
      const Tensor& t = elements[static_cast<size_t>(i)][c];
      const bool same = t.shape().dim_sizes() == absl::Span<const int64_t>(dims);
      if (same) continue;
      if (options_.kind != Kind::kPadding || static_cast<size_t>(t.dims()) != dims.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Queue '", options_.name, "': cannot batch component ", c, ": its elements have shapes ",
                         TensorShape(dims).DebugString(), " and ", t.shape().DebugString(),
                         ". Give the queue fully defined shapes, or use a PaddingFIFOQueue"));
      }
      for (size_t k = 0; k < dims.size(); ++k) dims[k] = std::max(dims[k], t.dim_size(static_cast<int>(k)));
    }
    if (n == 0 && !options_.shapes.empty() && options_.shapes[c].IsFullyDefined()) {
      dims.assign(options_.shapes[c].dims().begin(), options_.shapes[c].dims().end());
    }
    dims.insert(dims.begin(), n);
    ASSIGN_OR_RETURN(Tensor batch, Tensor::Allocate(options_.dtypes[c], TensorShape(dims)));
    for (int64_t i = 0; i < n; ++i) CopyIntoRow(elements[static_cast<size_t>(i)][c], &batch, i);
    out->push_back(std::move(batch));
  }
  return absl::OkStatus();
}

void Queue::Close(bool cancel_pending_enqueues) {
  Finished done;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    if (cancel_pending_enqueues) {
      for (auto& a : enqueues_) {
        a->status = ClosedError("its pending enqueues were cancelled");
        done.push_back(std::move(a));
      }
      enqueues_.clear();
    }
    ProcessLocked(&done);
  }
  Finish(std::move(done));
}

int64_t Queue::Size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(elements_.size());
}

bool Queue::IsClosed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace distflow
