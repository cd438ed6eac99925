#include "kernels/data/dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace distflow {
namespace data {

void DatasetStore::Put(const std::string& key, DatasetPtr dataset) {
  absl::MutexLock lock(&mu_);
  datasets_[key] = std::move(dataset);
}

absl::StatusOr<DatasetPtr> DatasetStore::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = datasets_.find(key);
  if (it == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat("No dataset '", key,
                                            "' on this task: a dataset and the ops that read it must run on "
                                            "the same task"));
  }
  return it->second;
}

namespace {}  // namespace

absl::StatusOr<std::shared_ptr<DatasetStore>> DatasetStoreOf(OpKernelContext* ctx) {
  return ctx->resource_manager()->LookupOrCreate<DatasetStore>(ctx->default_container(), "_datasets",
                                                               [] { return std::make_shared<DatasetStore>(); });
}

absl::Status DatasetOpKernel::Compute(OpKernelContext* ctx) {
  DF_ASSIGN_OR_RETURN(DatasetPtr dataset, MakeDataset(ctx));
  DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetStore> store, DatasetStoreOf(ctx));
  store->Put(name(), std::move(dataset));
  return ctx->set_output(0, Tensor::Scalar<std::string>(name()));
}

absl::StatusOr<DatasetPtr> InputDataset(OpKernelContext* ctx, int i) {
  const Tensor& key = ctx->input(i);
  if (key.dtype() != DT_STRING || key.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("Input ", i, " must be a dataset (a string scalar), got ",
                                                   DataTypeName(key.dtype()), " ", key.shape().DebugString()));
  }
  DF_ASSIGN_OR_RETURN(std::shared_ptr<DatasetStore> store, DatasetStoreOf(ctx));
  return store->Get(key.flat<std::string>()[0]);
}

absl::StatusOr<int64_t> ScalarInputInt(OpKernelContext* ctx, int i, const char* what) {
  const Tensor& t = ctx->input(i);
  if (t.NumElements() != 1 || t.shape().dims() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", what, "' must be a scalar, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT64) return t.flat<int64_t>()[0];
  if (t.dtype() == DT_INT32) return int64_t{t.flat<int32_t>()[0]};
  return absl::InvalidArgumentError(absl::StrCat("'", what, "' must be int32 or int64, got ", DataTypeName(t.dtype())));
}

Tensor Keep(const Tensor& t) {
  if (t.buffer() != nullptr && t.buffer()->borrowed()) return t.DeepCopy();
  return t;
}

namespace {

// Copies the block of `src` at dimension `d` into `dst`, where `dst_strides`
// are the destination's strides in elements (the source is dense).
template <typename T>
void CopyBlock(const T* src, const TensorShape& src_shape, int d, T* dst, const std::vector<int64_t>& dst_strides) {
  const int rank = src_shape.dims();
  if (d == rank) {
    *dst = *src;
    return;
  }
  int64_t src_stride = 1;
  for (int k = d + 1; k < rank; ++k) src_stride *= src_shape.dim_size(k);
  if (d == rank - 1) {
    std::copy(src, src + src_shape.dim_size(d), dst);
    return;
  }
  for (int64_t i = 0; i < src_shape.dim_size(d); ++i) {
    CopyBlock(src + i * src_stride, src_shape, d + 1, dst + i * dst_strides[static_cast<size_t>(d)], dst_strides);
  }
}

}  // namespace

absl::Status CopyIntoRow(const Tensor& element, int64_t row, Tensor* batch) {
  const TensorShape& es = element.shape();
  const TensorShape& bs = batch->shape();
  if (element.dtype() != batch->dtype() || bs.dims() != es.dims() + 1 || row < 0 || row >= bs.dim_size(0)) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot put a ", DataTypeName(element.dtype()), " ",
                                                   es.DebugString(), " element into row ", row, " of a ",
                                                   DataTypeName(batch->dtype()), " ", bs.DebugString(), " batch"));
  }
  std::vector<int64_t> strides(static_cast<size_t>(es.dims()), 1);
  int64_t row_size = 1;
  for (int k = es.dims() - 1; k >= 0; --k) {
    if (es.dim_size(k) > bs.dim_size(k + 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("An element of shape ", es.DebugString(), " does not fit a batch of shape ", bs.DebugString()));
    }
    strides[static_cast<size_t>(k)] = row_size;
    row_size *= bs.dim_size(k + 1);
  }
  return VisitDataType(element.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = batch->flat<T>().data() + row * row_size;
    if (element.NumElements() == 0) return absl::OkStatus();
    CopyBlock<T>(element.flat<T>().data(), es, 0, dst, strides);
    return absl::OkStatus();
  });
}

}  // namespace data
}  // namespace distflow
