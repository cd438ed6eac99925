// TensorBuffer: a refcounted block of tensor memory. Tensors share buffers
// through std::shared_ptr, so slicing and reshaping copy nothing.
//
// Two kinds: memory allocated here (64-byte aligned, with std::string objects
// constructed in place for DT_STRING), and memory owned by someone else (e.g. a
// received network buffer) that is released by a callback when the last tensor
// referring to it is gone. Immutable after construction; thread-safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/types.h"

namespace distflow {

class DISTFLOW_EXPORT TensorBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  // Allocates room for `num_elements` of `dtype`. Strings are constructed
  // empty; numeric memory is left uninitialised. ResourceExhausted if the
  // allocation fails or its byte size would overflow.
  static absl::StatusOr<std::shared_ptr<TensorBuffer>> Allocate(DataType dtype, int64_t num_elements);

  // Wraps memory owned elsewhere; `release` runs when the buffer is destroyed.
  // Not for DT_STRING.
  static std::shared_ptr<TensorBuffer> Wrap(void* data, size_t size, std::function<void()> release);
  // Wraps memory its owner keeps using, e.g. a numpy array fed to a session:
  // distflow reads it, and whatever would write it or keep it past the step
  // (a variable assigned from it) copies it first. `release` may run on any
  // thread.
  static std::shared_ptr<TensorBuffer> Borrow(const void* data, size_t size, std::function<void()> release);

  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // True for Borrow()ed memory: not ours to write or to keep.
  bool borrowed() const { return borrowed_; }

 private:
  TensorBuffer() = default;

  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;            // bytes actually allocated (owned buffers)
  int64_t num_strings_ = 0;        // > 0 only for owned DT_STRING buffers
  bool owned_ = false;             // freed (or unmapped, or cached) on destruction
  bool borrowed_ = false;          // Borrow()ed: read-only, copied before it is kept
  std::function<void()> release_;  // for wrapped memory
};

}  // namespace distflow
