#include "bulk/shm_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/bytes_copied.h"
#include "base/logging.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_channel.h"
#include "tensor/shared_blocks.h"

namespace distflow {
namespace bulk_internal {

SentBlocks::Answer SentBlocks::Plan(const void* p, size_t n) {
  Answer a;
  // Blocks retired since the last look: the client lets go of its mappings.
  if (const uint64_t retired = shared_blocks::Retired(); retired != retired_seen_) {
    retired_seen_ = retired;
    for (auto it = sent_.begin(); it != sent_.end();) {
      if (shared_blocks::Alive(it->first)) {
        ++it;
        continue;
      }
      a.drops.push_back(it->first);
      bytes_ -= it->second.bytes;
      it = sent_.erase(it);
    }
  }
  const std::optional<shared_blocks::BlockRef> block = n == 0 ? std::nullopt : shared_blocks::Find(p, n);
  if (!block.has_value() || block->bytes > kMaxMappedBytes) return a;
  a.mapped = true;
  a.id = block->id;
  a.offset = block->offset;
  a.block_bytes = block->bytes;
  auto it = sent_.find(block->id);
  if (it != sent_.end()) {
    it->second.last_use = ++uses_;
    return a;
  }
  // New to the client: make room (least recently used first), then send it.
  while (!sent_.empty() && (sent_.size() >= kMaxMappedBlocks || bytes_ + block->bytes > kMaxMappedBytes)) {
    auto oldest = sent_.begin();
    for (auto s = sent_.begin(); s != sent_.end(); ++s)
      if (s->second.last_use < oldest->second.last_use) oldest = s;
    a.drops.push_back(oldest->first);
    bytes_ -= oldest->second.bytes;
    sent_.erase(oldest);
  }
  sent_.emplace(block->id, Sent{block->bytes, ++uses_});
  bytes_ += block->bytes;
  a.fd = block->fd;
  return a;
}

std::vector<char> EncodeMappedAnswer(uint64_t len, const SentBlocks::Answer& a) {
  std::vector<char> out(8 + kMappedAnswerBytes + 8 * a.drops.size());
  PutU64(out.data(), len);
  char* p = out.data() + 8;
  PutU32(p, a.mapped ? kMappedModeBlock : kMappedModeRing);
  PutU32(p + 4, static_cast<uint32_t>(a.drops.size()));
  PutU64(p + 8, a.id);
  PutU64(p + 16, a.offset);
  PutU64(p + 24, a.block_bytes);
  for (size_t i = 0; i < a.drops.size(); ++i) PutU64(p + kMappedAnswerBytes + 8 * i, a.drops[i]);
  return out;
}

MappedBlocks::~MappedBlocks() {
  for (const auto& [id, m] : maps_) munmap(const_cast<char*>(m.base), m.bytes);
}

void MappedBlocks::Drop(uint64_t id) {
  auto it = maps_.find(id);
  if (it == maps_.end()) return;
  munmap(const_cast<char*>(it->second.base), it->second.bytes);
  bytes_ -= it->second.bytes;
  maps_.erase(it);
}

absl::Status MappedBlocks::Add(uint64_t id, int fd, uint64_t block_bytes) {
  auto refuse = [&](const std::string& why) {
    close(fd);
    return absl::DataLossError(absl::StrCat("the peer's shared block ", id, " is unusable: ", why));
  };
  if (maps_.count(id) != 0) return refuse("it is mapped already (the peer sent it twice)");
  if (block_bytes == 0 || maps_.size() >= kMaxMappedBlocks || block_bytes > kMaxMappedBytes - bytes_) {
    return refuse(absl::StrCat("mapping its ", block_bytes, " bytes would exceed this connection's limit of ",
                               kMaxMappedBlocks, " blocks and ", kMaxMappedBytes, " bytes (", maps_.size(),
                               " blocks and ", bytes_, " bytes mapped)"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != block_bytes) {
    return refuse(absl::StrCat("it is not a segment of the ", block_bytes, " bytes announced"));
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return refuse("it is not sealed against resizing");
  }
  // Populated at once: one call instead of a fault per page on first use.
  void* base = mmap(nullptr, block_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) return refuse(absl::StrCat("mmap: ", std::strerror(errno)));
  close(fd);
  maps_.emplace(id, Map{static_cast<const char*>(base), block_bytes});
  bytes_ += block_bytes;
  return absl::OkStatus();
}

absl::StatusOr<const char*> MappedBlocks::Bytes(uint64_t id, uint64_t offset, uint64_t n) const {
  auto it = maps_.find(id);
  if (it == maps_.end()) {
    return absl::DataLossError(absl::StrCat("the peer named shared block ", id, ", which it never handed over"));
  }
  const Map& m = it->second;
  if (offset > m.bytes || n > m.bytes - offset) {
    return absl::DataLossError(absl::StrCat("the peer named ", n, " bytes at offset ", offset, " of shared block ", id,
                                            ", which has ", m.bytes));
  }
  return m.base + offset;
}

namespace {

// Reads exactly `n` bytes; a descriptor that comes with them is added to
// *fd, and a second one is refused (closed; *extra set).
size_t ReadCollectingFd(int sock, char* p, size_t n, int* fd, bool* extra, int* err) {
  int got_fd = -1;
  const size_t got = ReadWithFd(sock, p, n, &got_fd, err);
  if (got_fd >= 0) {
    if (*fd < 0) {
      *fd = got_fd;
    } else {
      close(got_fd);
      *extra = true;
    }
  }
  return got;
}

}  // namespace

MappedReceipt ReceiveMapped(int sock, MappedBlocks& blocks, int memfd, char* dst, size_t n) {
  MappedReceipt r;
  bool extra = false;
  char fields[kMappedAnswerBytes];
  int err = 0;
  auto finish = [&]() {
    if (memfd >= 0) close(memfd);
    return r;
  };
  if (ReadCollectingFd(sock, fields, sizeof(fields), &memfd, &extra, &err) != sizeof(fields)) {
    r.io_err = err != 0 ? err : ECONNRESET;
    return finish();
  }
  const uint32_t mode = GetU32(fields);
  const uint32_t drops = GetU32(fields + 4);
  const uint64_t id = GetU64(fields + 8), offset = GetU64(fields + 16), block_bytes = GetU64(fields + 24);
  if ((mode != kMappedModeRing && mode != kMappedModeBlock) || drops > 2 * kMaxMappedBlocks) {
    r.bad = absl::DataLossError(absl::StrCat("a malformed answer (mode ", mode, ", ", drops, " blocks to drop)"));
    return finish();
  }
  for (uint32_t i = 0; i < drops; ++i) {
    char idb[8];
    if (ReadCollectingFd(sock, idb, sizeof(idb), &memfd, &extra, &err) != sizeof(idb)) {
      r.io_err = err != 0 ? err : ECONNRESET;
      return finish();
    }
    blocks.Drop(GetU64(idb));
  }
  if (extra || (mode == kMappedModeRing && memfd >= 0)) {
    r.bad = absl::DataLossError("the answer carried a descriptor it did not announce");
    return finish();
  }
  if (mode == kMappedModeRing) {
    r.ring = true;
    return r;
  }
  if (memfd >= 0) {
    absl::Status added = blocks.Add(id, memfd, block_bytes);
    memfd = -1;  // taken
    if (!added.ok()) {
      // Not mappable here: this transfer takes the ring, and neither side
      // keeps the block on record.
      blocks.Drop(id);
      LOG(WARNING) << "Bulk transfer: " << added.message() << "; the bytes come through the ring";
      r.ring = r.tell_ring = true;
      return r;
    }
  }
  absl::StatusOr<const char*> src = blocks.Bytes(id, offset, n);
  if (!src.ok()) {
    r.bad = src.status();
    return r;
  }
  std::memcpy(dst, *src, n);
  static Counter* const copied = BytesCopiedCounter("shm_mapped");
  copied->Increment(static_cast<double>(n));
  r.copied = true;
  return r;
}

}  // namespace bulk_internal
}  // namespace distflow
