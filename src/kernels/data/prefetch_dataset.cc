// PrefetchDataset: each iterator owns a thread that reads its input ahead
// into a bounded buffer, so the step that asks for an element finds it ready
// (the input's work, batching or file reads, overlaps the training step).
// The thread stops and is joined when the iterator is destroyed (a new
// MakeIterator, a session reset).
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "kernels/data/dataset.h"
#include "kernels/data/dataset_kernels.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace data {
namespace {

// Thread-safe: the producer thread and one consumer.
class PrefetchIterator : public DatasetIterator {
 public:
  PrefetchIterator(DatasetPtr dataset, std::unique_ptr<DatasetIterator> input, size_t capacity)
      : dataset_(std::move(dataset)), input_(std::move(input)), capacity_(capacity) {
    thread_ = std::thread([this] { Produce(); });
  }
  ~PrefetchIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  absl::Status GetNext(Element* out, bool* end) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PrefetchIterator* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return !p->buffer_.empty() || p->done_; },
        this));
    if (!buffer_.empty()) {
      *out = std::move(buffer_.front());
      buffer_.pop_front();
      *end = false;
      return absl::OkStatus();
    }
    *end = true;
    return status_;
  }

 private:
  void Produce() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](PrefetchIterator* p)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stop_ || p->buffer_.size() < p->capacity_; },
            this));
        if (stop_) return;
      }
      Element e;
      bool end = false;
      absl::Status s = input_->GetNext(&e, &end);  // only this thread touches input_
      absl::MutexLock lock(&mu_);
      if (!s.ok() || end) {
        status_ = s;
        done_ = true;
        return;
      }
      buffer_.push_back(std::move(e));
    }
  }

  const DatasetPtr dataset_;
  const std::unique_ptr<DatasetIterator> input_;
  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, size_t capacity)
      : Dataset(input->dtypes()), input_(std::move(input)), capacity_(capacity) {}
  absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const override {
    DF_ASSIGN_OR_RETURN(std::unique_ptr<DatasetIterator> in, input_->MakeIterator());
    return std::unique_ptr<DatasetIterator>(new PrefetchIterator(Self<PrefetchDataset>(), std::move(in), capacity_));
  }
  std::string DebugName() const override { return absl::StrCat("PrefetchDataset(", input_->DebugName(), ")"); }

 private:
  const DatasetPtr input_;
  const size_t capacity_;
};

class PrefetchOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;

 protected:
  absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) override {
    DF_ASSIGN_OR_RETURN(DatasetPtr input, InputDataset(ctx, 0));
    DF_ASSIGN_OR_RETURN(int64_t size, ScalarInputInt(ctx, 1, "buffer_size"));
    if (size == -1) size = 2;  // tf.data.experimental.AUTOTUNE
    if (size < 1) return absl::InvalidArgumentError(absl::StrCat("'buffer_size' must be positive or -1, got ", size));
    return DatasetPtr(std::make_shared<PrefetchDataset>(std::move(input), static_cast<size_t>(size)));
  }
};

}  // namespace

void RegisterPrefetchDatasetKernels(KernelRegistry* r) { r->Register<PrefetchOp>("PrefetchDataset", kCpu, DT_INVALID); }

}  // namespace data
}  // namespace distflow
