#include "tensor/tensor_buffer.h"

#include <cstdlib>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"

namespace distflow {

absl::StatusOr<std::shared_ptr<TensorBuffer>> TensorBuffer::Allocate(DataType dtype,
                                                                      int64_t num_elements) {
  if (num_elements < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Negative element count ", num_elements));
  }
  size_t elem = dtype == DT_STRING ? sizeof(std::string) : DataTypeSize(dtype);
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot allocate a tensor of dtype ", DataTypeName(dtype)));
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(num_elements), elem, &bytes) ||
      bytes > (SIZE_MAX - kAlignment)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("A tensor of ", num_elements, " ", DataTypeName(dtype), " elements is too large"));
  }
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = nullptr;
  if (rounded > 0) {
    p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("Out of memory allocating ", bytes,
                                                       " bytes for a ", DataTypeName(dtype), " tensor"));
    }
  }
  std::shared_ptr<TensorBuffer> buf(new TensorBuffer);
  buf->data_ = p;
  buf->size_ = bytes;
  buf->owned_ = true;
  if (dtype == DT_STRING) {
    auto* s = static_cast<std::string*>(p);
    for (int64_t i = 0; i < num_elements; ++i) new (s + i) std::string();
    buf->num_strings_ = num_elements;
  }
  return buf;
}

std::shared_ptr<TensorBuffer> TensorBuffer::Wrap(void* data, size_t size, std::function<void()> release) {
  std::shared_ptr<TensorBuffer> buf(new TensorBuffer);
  buf->data_ = data;
  buf->size_ = size;
  buf->release_ = std::move(release);
  return buf;
}

TensorBuffer::~TensorBuffer() {
  if (num_strings_ > 0) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_strings_; ++i) s[i].~basic_string();
  }
  if (owned_) std::free(data_);
  if (release_) release_();
}

}  // namespace distflow
