#include "distflow/tensor_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tensor/shared_blocks.h"

namespace distflow {
namespace {

// Buffers from kCacheMinBytes up are mapped and, freed, kept for reuse.
// Mid-sized buffers (a step's activations and gradients: 256 KiB to a few
// MiB) used to come from malloc, which gives freed memory back to the system
// between steps (heap trimming, mmapped chunks), so every step touched fresh
// pages again: about 500 page faults per step of the book's CNN, a third of
// its time on a virtual machine where a fault is expensive. Kept here, the
// same shapes in the next step find their blocks already mapped.
constexpr size_t kCacheMinBytes = size_t{256} << 10;
constexpr size_t kCacheMaxBytes = size_t{512} << 20;

// Freed large blocks, by size, for reuse.
class LargeBlockCache {
 public:
  void* Take(size_t capacity) {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(capacity);
    if (it == blocks_.end()) return nullptr;
    void* p = it->second;
    blocks_.erase(it);
    total_ -= capacity;
    return p;
  }
  // False if the cache is full (the caller frees the block).
  bool Give(void* p, size_t capacity) {
    absl::MutexLock lock(&mu_);
    if (total_ + capacity > kCacheMaxBytes) return false;
    blocks_.emplace(capacity, p);
    total_ += capacity;
    return true;
  }

 private:
  absl::Mutex mu_;
  std::multimap<size_t, void*> blocks_ ABSL_GUARDED_BY(mu_);
  size_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

LargeBlockCache& Cache() {
  static LargeBlockCache* cache = new LargeBlockCache;
  return *cache;
}

// Cached sizes are rounded up to a size class: an eighth of the power of
// two below the size (at most 12.5% more than asked), so tensors whose
// shapes differ a little (the last, short batch) still share blocks.
size_t Capacity(size_t bytes) {
  size_t rounded = (bytes + TensorBuffer::kAlignment - 1) / TensorBuffer::kAlignment * TensorBuffer::kAlignment;
  if (rounded >= kCacheMinBytes) {
    size_t granule = (size_t{1} << (63 - __builtin_clzll(rounded))) / 8;
    rounded = (rounded + granule - 1) / granule * granule;
  }
  return rounded;
}

}  // namespace

absl::StatusOr<std::shared_ptr<TensorBuffer>> TensorBuffer::Allocate(DataType dtype, int64_t num_elements) {
  if (num_elements < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Negative element count ", num_elements));
  }
  size_t elem = dtype == DT_STRING ? sizeof(std::string) : DataTypeSize(dtype);
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot allocate a tensor of dtype ", DataTypeName(dtype)));
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(num_elements), elem, &bytes) || bytes > (SIZE_MAX - kAlignment)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("A tensor of ", num_elements, " ", DataTypeName(dtype), " elements is too large"));
  }
  size_t rounded = Capacity(bytes);
  void* p = nullptr;
  if (rounded >= kCacheMinBytes) {
    // Large buffers are mapped, not taken from malloc: freed, they go back to
    // the system (or the cache) whole, and never leave holes in malloc's
    // heaps that keep a long-running task's resident memory high.
    // With shared blocks on (shared_blocks.h), the big ones are memfds a
    // same-host peer can copy a served tensor out of.
    p = Cache().Take(rounded);
    while (p != nullptr && shared_blocks::KindOf(p) == shared_blocks::Kind::kInherited) {
      shared_blocks::Unmap(p, rounded);  // a forked child's copy of its parent's block: shared, never reused
      p = Cache().Take(rounded);
    }
    if (p == nullptr) p = shared_blocks::Map(rounded);
    if (p == nullptr) {
      p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) p = nullptr;
    }
  } else if (rounded > 0) {
    p = std::aligned_alloc(kAlignment, rounded);
  }
  if (rounded > 0 && p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Out of memory allocating ", bytes, " bytes for a ", DataTypeName(dtype), " tensor"));
  }
  std::shared_ptr<TensorBuffer> buf(new TensorBuffer);
  buf->data_ = p;
  buf->size_ = bytes;
  buf->capacity_ = rounded;
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

std::shared_ptr<TensorBuffer> TensorBuffer::Borrow(const void* data, size_t size, std::function<void()> release) {
  std::shared_ptr<TensorBuffer> buf = Wrap(const_cast<void*>(data), size, std::move(release));
  buf->borrowed_ = true;
  return buf;
}

TensorBuffer::~TensorBuffer() {
  if (num_strings_ > 0) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_strings_; ++i) s[i].~basic_string();
  }
  if (owned_) {
    if (capacity_ < kCacheMinBytes) {
      std::free(data_);
    } else {
      // Kept for reuse unless inherited across fork, or anonymous where new
      // blocks of its size are shared ones now.
      const shared_blocks::Kind kind = shared_blocks::KindOf(data_);
      const bool keep =
          kind == shared_blocks::Kind::kOwn ||
          (kind == shared_blocks::Kind::kNone && !(capacity_ >= shared_blocks::kMinBytes && shared_blocks::HasRoom()));
      if (!keep || !Cache().Give(data_, capacity_)) {
        if (!shared_blocks::Unmap(data_, capacity_)) munmap(data_, capacity_);
      }
    }
  }
  if (release_) release_();
}

}  // namespace distflow
