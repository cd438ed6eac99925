// Tensor: a typed, shaped view of a refcounted TensorBuffer.
//
// Copying a Tensor copies the view, not the data: both share the buffer. Slice
// (along dimension 0) and Reshaped are zero-copy too. A default-constructed
// Tensor is uninitialised (dtype DT_INVALID) and holds nothing.
//
// Typed access is cheap and light: flat<T>() is an absl::Span, matrix<T>() a
// row-major view, scalar<T>() a reference. Kernels wanting Eigen expressions
// include tensor/tensor_eigen.h (internal), which keeps Eigen out of every other file.
//
// Thread-safety: const methods may be called concurrently; the elements are
// not synchronised (a kernel writes to an output no one else reads yet).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "distflow/export.h"
#include "distflow/logging.h"
#include "distflow/tensor_buffer.h"
#include "distflow/tensor_shape.h"
#include "distflow/types.h"

namespace distflow {

// A row-major matrix view over a tensor's elements.
template <typename T>
struct DISTFLOW_EXPORT MatrixView {
  T* data;
  int64_t rows;
  int64_t cols;
  T& operator()(int64_t r, int64_t c) const { return data[r * cols + c]; }
};

class DISTFLOW_EXPORT Tensor {
 public:
  Tensor() = default;
  // Allocates a tensor; numeric elements are uninitialised, strings empty.
  // CHECK-fails if memory runs out: use Allocate where the shape came from input.
  Tensor(DataType dtype, const TensorShape& shape);

  static absl::StatusOr<Tensor> Allocate(DataType dtype, const TensorShape& shape);

  // A tensor over existing memory, e.g. a network buffer decoded in place.
  // `buffer` must hold at least offset + shape.num_elements() * size(dtype) bytes.
  static absl::StatusOr<Tensor> FromBuffer(DataType dtype, const TensorShape& shape,
                                           std::shared_ptr<TensorBuffer> buffer, size_t offset);

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape());
    t.scalar<T>() = std::move(value);
    return t;
  }
  // A tensor of `shape` holding `values` in row-major order (sizes must match).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const TensorShape& shape) {
    DF_CHECK(static_cast<int64_t>(values.size()) == shape.num_elements())
        << values.size() << " values for shape " << shape.DebugString();
    Tensor t(DataTypeToEnum<T>::value, shape);
    auto f = t.flat<T>();
    for (size_t i = 0; i < values.size(); ++i) f[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values) {
    return FromVector(values, TensorShape({static_cast<int64_t>(values.size())}));
  }

  bool IsInitialized() const { return dtype_ != DT_INVALID; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64_t dim_size(int i) const { return shape_.dim_size(i); }
  int64_t NumElements() const { return shape_.num_elements(); }
  // Bytes of element storage (for strings: the sum of their lengths).
  size_t TotalBytes() const;

  template <typename T>
  absl::Span<T> flat() {
    CheckType(DataTypeToEnum<T>::value);
    return absl::Span<T>(static_cast<T*>(raw_data()), static_cast<size_t>(NumElements()));
  }
  template <typename T>
  absl::Span<const T> flat() const {
    CheckType(DataTypeToEnum<T>::value);
    return absl::Span<const T>(static_cast<const T*>(raw_data()), static_cast<size_t>(NumElements()));
  }
  template <typename T>
  T& scalar() {
    DF_CHECK(NumElements() == 1) << "scalar() on a tensor of shape " << shape_.DebugString();
    return flat<T>()[0];
  }
  template <typename T>
  const T& scalar() const {
    DF_CHECK(NumElements() == 1) << "scalar() on a tensor of shape " << shape_.DebugString();
    return flat<T>()[0];
  }
  template <typename T>
  MatrixView<T> matrix() {
    DF_CHECK(dims() == 2) << "matrix() on a tensor of shape " << shape_.DebugString();
    return {flat<T>().data(), dim_size(0), dim_size(1)};
  }
  template <typename T>
  MatrixView<const T> matrix() const {
    DF_CHECK(dims() == 2) << "matrix() on a tensor of shape " << shape_.DebugString();
    return {flat<T>().data(), dim_size(0), dim_size(1)};
  }

  void* raw_data() { return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr; }
  const void* raw_data() const { return buffer_ ? static_cast<const char*>(buffer_->data()) + offset_ : nullptr; }

  // Rows [begin, end) along dimension 0, sharing this tensor's buffer.
  // CHECK-fails on a scalar or out-of-range bounds.
  Tensor Slice(int64_t begin, int64_t end) const;
  // The same elements under another shape with the same element count.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A tensor with its own copy of the elements.
  Tensor DeepCopy() const;

  bool SharesBufferWith(const Tensor& other) const { return buffer_ != nullptr && buffer_ == other.buffer_; }
  const std::shared_ptr<TensorBuffer>& buffer() const { return buffer_; }

  // numpy-like: "float32 [2,3] [[1 2 3]\n [4 5 6]]", eliding the middle of
  // dimensions longer than 2 * edge_items once there are more than
  // `summarize_over` elements.
  std::string DebugString(int64_t summarize_over = 1000, int edge_items = 3) const;

 private:
  void CheckType(DataType expected) const {
    DF_CHECK(dtype_ == expected) << "Tensor of dtype " << DataTypeName(dtype_) << " accessed as "
                                 << DataTypeName(expected);
  }

  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  std::shared_ptr<TensorBuffer> buffer_;
  size_t offset_ = 0;  // bytes from buffer_->data() to element 0
};

// A tensor's wire form: the serialized TensorProto that RPCs and checkpoints
// carry.
DISTFLOW_EXPORT std::string SerializeTensor(const Tensor& tensor);
// Parses a wire form back. The input is treated as hostile: a truncated or
// forged message is InvalidArgument naming the problem, never a crash or a
// huge allocation.
DISTFLOW_EXPORT absl::StatusOr<Tensor> ParseTensor(const void* data, size_t size);

}  // namespace distflow
