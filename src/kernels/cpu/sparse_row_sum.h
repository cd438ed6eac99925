// The sum of sparse gradients (IndexedSlices: rows of a [num_rows, ...]
// tensor) that a synchronous-training accumulator collects for one step
// (TensorFlow's SparseConditionalAccumulator): one summed row per distinct
// index, kept in index order, so memory and the chief's update scale with the
// rows the workers touched, not with the table. Internal to the sync
// kernels; not thread-safe (the Accumulator holding it locks).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "distflow/tensor.h"

namespace distflow {
namespace sync_training {

class SparseRowSum {
 public:
  bool empty() const { return slot_of_.empty() && num_rows_ < 0; }

  void Clear() {
    slot_of_.clear();
    f_.clear();
    d_.clear();
    num_rows_ = -1;
    row_shape_.clear();
  }

  // Adds values[i] to row indices[i] (int64 vector). values is [n, row...],
  // of the dtype the caller checked; every id and the row shape are checked
  // against num_rows and the rows added before, before anything is added.
  absl::Status Add(const std::string& name, const Tensor& indices, const Tensor& values, int64_t num_rows) {
    if (indices.dtype() != DT_INT64 || indices.dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sparse gradient accumulator '", name, "': indices must be an int64 vector, got ",
                       DataTypeName(indices.dtype()), " ", indices.shape().DebugString()));
    }
    if (values.dims() < 1 || values.dim_size(0) != indices.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat("Sparse gradient accumulator '", name, "': values of shape ",
                                                     values.shape().DebugString(), " do not have one row per index (",
                                                     indices.dim_size(0), " indices)"));
    }
    if (num_rows < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sparse gradient accumulator '", name, "': num_rows = ", num_rows, " is negative"));
    }
    std::vector<int64_t> row_shape(values.shape().dim_sizes().begin() + 1, values.shape().dim_sizes().end());
    if (num_rows_ >= 0 && (num_rows != num_rows_ || row_shape != row_shape_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sparse gradient accumulator '", name, "' holds rows of a ", num_rows_,
                       "-row tensor of row shape [", absl::StrJoin(row_shape_, ", "), "], got a gradient of a ",
                       num_rows, "-row tensor with values of shape ", values.shape().DebugString()));
    }
    auto ids = indices.flat<int64_t>();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= num_rows) {
        return absl::InvalidArgumentError(absl::StrCat("Sparse gradient accumulator '", name, "': indices[", i,
                                                       "] = ", ids[i], " is not in [0, ", num_rows, ")"));
      }
    }
    num_rows_ = num_rows;
    row_shape_ = row_shape;
    inner_ = 1;
    for (int64_t d : row_shape_) inner_ *= d;
    if (values.dtype() == DT_FLOAT) {
      AddRows<float>(ids, values.flat<float>().data(), &f_);
    } else {
      AddRows<double>(ids, values.flat<double>().data(), &d_);
    }
    return absl::OkStatus();
  }

  // The distinct indices in increasing order and their rows times `scale`.
  absl::Status Take(DataType dtype, double scale, Tensor* indices, Tensor* values, int64_t* num_rows) const {
    std::vector<int64_t> ids;
    ids.reserve(slot_of_.size());
    for (const auto& [id, slot] : slot_of_) ids.push_back(id);
    *indices = Tensor::FromVector<int64_t>(ids);
    std::vector<int64_t> dims = {static_cast<int64_t>(ids.size())};
    dims.insert(dims.end(), row_shape_.begin(), row_shape_.end());
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dtype, shape));
    if (dtype == DT_FLOAT) {
      Scaled<float>(f_, scale, out.flat<float>().data());
    } else {
      Scaled<double>(d_, scale, out.flat<double>().data());
    }
    *values = std::move(out);
    *num_rows = num_rows_;
    return absl::OkStatus();
  }

 private:
  template <typename T>
  void AddRows(absl::Span<const int64_t> ids, const T* src, std::vector<T>* sum) {
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [it, inserted] = slot_of_.emplace(ids[i], slot_of_.size());
      if (inserted) sum->resize(sum->size() + static_cast<size_t>(inner_), T(0));
      T* row = sum->data() + static_cast<int64_t>(it->second) * inner_;
      const T* in = src + static_cast<int64_t>(i) * inner_;
      for (int64_t j = 0; j < inner_; ++j) row[j] += in[j];
    }
  }
  template <typename T>
  void Scaled(const std::vector<T>& sum, double scale, T* out) const {
    int64_t k = 0;
    for (const auto& [id, slot] : slot_of_) {
      const T* row = sum.data() + static_cast<int64_t>(slot) * inner_;
      for (int64_t j = 0; j < inner_; ++j) out[k * inner_ + j] = static_cast<T>(row[j] * scale);
      ++k;
    }
  }

  std::map<int64_t, size_t> slot_of_;  // index -> its row in f_ / d_
  std::vector<float> f_;
  std::vector<double> d_;
  int64_t num_rows_ = -1;
  std::vector<int64_t> row_shape_;
  int64_t inner_ = 1;
};

}  // namespace sync_training
}  // namespace distflow
