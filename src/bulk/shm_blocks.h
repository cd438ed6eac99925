// Mapped gets on a shared-memory connection: the client copies a served
// tensor straight out of the server's memory (tensor/shared_blocks.h), one
// copy instead of the ring's two. Internal to bulk/ (the wire format is in
// bulk_transfer.h, the reasons in docs/TRANSPORT.md).
//
// The server hands each block's memfd over once per connection; after that
// an answer names (block id, offset). The server's SentBlocks is the one
// record of what the client has mapped: it tells the client to drop a block
// that was retired (its memory would otherwise stay alive in the client) or
// that falls out of the connection's budget (least recently used first),
// and the client's MappedBlocks does as told, so the two always agree. The
// client trusts nothing it is told: a block must be a sealed memfd of the
// announced size, an offset and length must lie inside the mapping, limits
// bound what it maps; anything else is DataLoss, never a fault.
//
// Both classes are thread-compatible: one per connection, used by the
// thread serving or fetching on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"

namespace distflow {
namespace bulk_internal {

// Per connection: blocks mapped, and their bytes.
inline constexpr size_t kMaxMappedBlocks = 64;
inline constexpr uint64_t kMaxMappedBytes = uint64_t{4} << 30;
// A mapped get's answer after the u64 length: u32 mode, u32 drop count,
// u64 block id, u64 offset, u64 block bytes; then the drops (u64 ids).
inline constexpr size_t kMappedAnswerBytes = 32;
inline constexpr uint32_t kMappedModeRing = 0;
inline constexpr uint32_t kMappedModeBlock = 1;

// The server's side: what its client has mapped.
class SentBlocks {
 public:
  struct Answer {
    bool mapped = false;  // false: the bytes go through the ring
    uint64_t id = 0, offset = 0, block_bytes = 0;
    int fd = -1;                  // >= 0: the block is new to the client; send this descriptor
    std::vector<uint64_t> drops;  // blocks the client is to unmap first
  };
  // How to serve the `n` bytes at `p` (memory the caller holds alive).
  Answer Plan(const void* p, size_t n);
  // The client could not map block `id` and holds no mapping of it.
  void Forget(uint64_t id) { sent_.erase(id); }
  size_t size() const { return sent_.size(); }

 private:
  struct Sent {
    uint64_t bytes;
    uint64_t last_use;
  };
  std::map<uint64_t, Sent> sent_;
  uint64_t bytes_ = 0;
  uint64_t uses_ = 0;
  uint64_t retired_seen_ = 0;
};

// The client's side: the peer's blocks it has mapped (read-only), unmapped
// when dropped or when the connection goes.
class MappedBlocks {
 public:
  MappedBlocks() = default;
  ~MappedBlocks();
  MappedBlocks(const MappedBlocks&) = delete;
  MappedBlocks& operator=(const MappedBlocks&) = delete;

  void Drop(uint64_t id);  // an id never mapped is ignored
  // Maps block `id` from `fd` (taken: closed in every case), which must be
  // a memfd of `block_bytes` sealed against resizing. DataLoss if it is not,
  // if `id` is mapped already, or past the limits.
  absl::Status Add(uint64_t id, int fd, uint64_t block_bytes);
  // The `n` bytes at `offset` of mapped block `id`; DataLoss naming what
  // is wrong if `id` is not mapped or the range leaves the block.
  absl::StatusOr<const char*> Bytes(uint64_t id, uint64_t offset, uint64_t n) const;
  size_t size() const { return maps_.size(); }

 private:
  struct Map {
    const char* base;
    uint64_t bytes;
  };
  std::map<uint64_t, Map> maps_;
  uint64_t bytes_ = 0;
};

// What the client made of a mapped get's answer (ReceiveMapped).
struct MappedReceipt {
  int io_err = 0;          // the connection failed (an errno)
  absl::Status bad;        // the answer was malformed (DataLoss): close the connection
  bool copied = false;     // the bytes are in the destination: answer kDirectDone
  bool ring = false;       // the bytes come through the ring...
  bool tell_ring = false;  // ...once the client answers kDirectUseRing (it could not map the block)
};
// Reads the rest of a mapped get's answer on `sock` after its length
// (`memfd`: a descriptor that came with the length, or -1; taken), unmaps
// the blocks it drops, maps a new block, and copies the `n` bytes it names
// into `dst`.
MappedReceipt ReceiveMapped(int sock, MappedBlocks& blocks, int memfd, char* dst, size_t n);

// A mapped get's whole answer for a tensor of `len` bytes: the u64 length,
// then the fields above and the drops.
std::vector<char> EncodeMappedAnswer(uint64_t len, const SentBlocks::Answer& a);

}  // namespace bulk_internal
}  // namespace distflow
