// tf.data in the runtime: a Dataset is an immutable description of a
// sequence of elements (each a vector of tensors, its components), and a
// DatasetIterator walks one pass over it. Datasets are built by the dataset
// ops (graph/ops/dataset_ops.cc) on the task that runs them and live in that
// task's ResourceMgr (a DatasetStore per container, keyed by the node that
// made them), so a pipeline's elements never leave the task: an op's output
// is only the dataset's key, a string scalar. Iterator ops
// (iterator_kernels.cc) hold a DatasetIterator in an IteratorResource.
//
// A Dataset is immutable and thread-safe; a DatasetIterator is used by one
// consumer at a time (the IteratorResource serialises GetNext).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace data {

using Element = std::vector<Tensor>;

class DatasetIterator {
 public:
  virtual ~DatasetIterator() = default;
  // The next element into *out, or *end = true (and *out untouched) once the
  // sequence is over; an error names what went wrong (a file, a shape).
  virtual absl::Status GetNext(Element* out, bool* end) = 0;
};

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  explicit Dataset(std::vector<DataType> dtypes) : dtypes_(std::move(dtypes)) {}
  virtual ~Dataset() = default;

  // A fresh pass from the start. Datasets that draw random numbers (shuffle)
  // may give each pass another order.
  virtual absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeIterator() const = 0;
  // "TensorSliceDataset", "BatchDataset(TensorSliceDataset)": for errors.
  virtual std::string DebugName() const = 0;

  const std::vector<DataType>& dtypes() const { return dtypes_; }

 protected:
  // This dataset, for iterators to keep alive (a dataset is always held by a shared_ptr).
  template <typename T>
  std::shared_ptr<const T> Self() const {
    return std::static_pointer_cast<const T>(shared_from_this());
  }

 private:
  const std::vector<DataType> dtypes_;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// An iterator with a function for GetNext, for the small transformations
// (the function's captures are the iterator's state).
class FnIterator : public DatasetIterator {
 public:
  using Fn = std::function<absl::Status(Element*, bool*)>;
  explicit FnIterator(Fn fn) : fn_(std::move(fn)) {}
  absl::Status GetNext(Element* out, bool* end) override { return fn_(out, end); }

 private:
  Fn fn_;
};

inline absl::StatusOr<std::unique_ptr<DatasetIterator>> MakeFn(FnIterator::Fn fn) {
  return std::unique_ptr<DatasetIterator>(new FnIterator(std::move(fn)));
}

// The datasets a task's dataset ops made, by key (the making node's name);
// running the node again replaces its dataset.
class DatasetStore : public Resource {
 public:
  static constexpr char kTypeName[] = "DatasetStore";
  const char* type_name() const override { return kTypeName; }

  void Put(const std::string& key, DatasetPtr dataset) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<DatasetPtr> Get(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, DatasetPtr> datasets_ ABSL_GUARDED_BY(mu_);
};

// The base of every op that makes a dataset: MakeDataset builds it from the
// inputs; Compute stores it under the node's name and outputs that key.
class DatasetOpKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) final;
  bool IsExpensive() const override { return false; }

 protected:
  virtual absl::StatusOr<DatasetPtr> MakeDataset(OpKernelContext* ctx) = 0;
};

// The DatasetStore of the op's device and container.
absl::StatusOr<std::shared_ptr<DatasetStore>> DatasetStoreOf(OpKernelContext* ctx);
// The dataset whose key is input `i` of the op.
absl::StatusOr<DatasetPtr> InputDataset(OpKernelContext* ctx, int i);
// Input `i` as one integer (int32 or int64 scalar); InvalidArgument naming `what`.
absl::StatusOr<int64_t> ScalarInputInt(OpKernelContext* ctx, int i, const char* what);
// A tensor a dataset may keep past the step: memory lent by the caller (a
// numpy feed) is copied, since it is only valid during the step.
Tensor Keep(const Tensor& t);

// Copies `element` into row `row` of `batch` (whose shape is [n] + the
// element's shape, or, for padding, [n] + a shape at least as large in every
// dimension; the padding is left as it is).
absl::Status CopyIntoRow(const Tensor& element, int64_t row, Tensor* batch);

}  // namespace data
}  // namespace distflow
