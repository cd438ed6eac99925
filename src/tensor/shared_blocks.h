// Large tensor buffers in shared memory, so a same-host peer can copy a
// served tensor straight out of it (bulk/, docs/TRANSPORT.md).
//
// Once a process turns shared blocks on (its bulk server does when it
// serves same-host peers through shared memory), TensorBuffer maps every
// new buffer of kMinBytes or more as a memfd of its own ("distflow-tensor"),
// MAP_SHARED, instead of anonymous memory. The block stays the process's
// memory in every other respect: freed, it goes back to TensorBuffer's cache
// and serves the next buffer of its size class under the same id; only when
// the cache is full is it retired (unmapped, its memfd closed). Its size is
// sealed (F_SEAL_SHRINK|F_SEAL_GROW), so nobody holding the descriptor can
// truncate it under a mapping, and so are new writable mappings
// (F_SEAL_FUTURE_WRITE, after the process's own): a peer handed the
// descriptor can read the block, never write it. Ids are never reused, so a peer that mapped
// block 7 knows a later block 7 is the same memory.
//
// Off (anonymous memory, as before) with DISTFLOW_SHM_TENSORS=0, where
// memfd_create fails, and past kMaxBlocks live blocks (each holds a
// descriptor). A forked child inherits MAP_SHARED mappings as shared, not
// copy-on-write: a child never reuses (nor serves) a block its parent made;
// a block it frees is unmapped in the child only.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace distflow {
namespace shared_blocks {

// The bulk threshold (bulk/bulk_transfer.h): smaller tensors never travel
// as tickets, so their blocks need not be shared.
inline constexpr size_t kMinBytes = size_t{1} << 20;
inline constexpr size_t kMaxBlocks = 1024;

// Turns shared blocks on for buffers allocated from now on (idempotent).
// False if they stay off (DISTFLOW_SHM_TENSORS=0, no memfd_create).
bool Enable();
bool Enabled();

// Where [p, p + n) lies: a live block of this process.
struct BlockRef {
  uint64_t id;    // unique for the process's lifetime
  int fd;         // the block's memfd; open while the block lives
  size_t bytes;   // the block's size (the memfd's)
  size_t offset;  // of p in the block
};
// nullopt unless [p, p + n) lies inside one shared block this process made.
// The caller keeps the block alive (holds the tensor) while it uses fd.
std::optional<BlockRef> Find(const void* p, size_t n);
// Blocks retired so far: a peer's mappings of them are stale. Callers that
// remember ids look at Alive() only when this changes.
uint64_t Retired();
bool Alive(uint64_t id);
size_t NumLiveForTest();

// For TensorBuffer (tensor_buffer.cc).
enum class Kind { kNone, kOwn, kInherited };
// A new shared block of `bytes` (a multiple of the page size, >= kMinBytes),
// or nullptr: map anonymous memory instead.
void* Map(size_t bytes);
// What `p` (the start of a large buffer) is: not a shared block, one of ours
// (reusable), or one inherited across fork (never reused).
Kind KindOf(const void* p);
// True while Map() would make a block (on, and under the block limit).
bool HasRoom();
// Unmaps `p` and closes its memfd if it is a shared block (true); false if
// it is not one (the caller unmaps it).
bool Unmap(void* p, size_t bytes);

}  // namespace shared_blocks
}  // namespace distflow
