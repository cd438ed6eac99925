// Same-host shared memory under the bulk port: the pieces its server and
// client share. Internal to bulk/ (see bulk_transfer.h for when it is used).
//
// A shared-memory connection is a Unix-domain stream socket in the abstract
// namespace (nothing on the filesystem) plus one memfd segment (nothing in
// /dev/shm) that the server creates per connection and hands to the client
// with SCM_RIGHTS once the client's hello carried the cluster token. The
// kernel frees both when the last process holding them exits, SIGKILL
// included.
//
// The segment is a ring of kShmSlots slots of kShmSlotBytes. A tensor of n
// bytes moves as ceil(n / kShmSlotBytes) chunks: the producer copies chunk i
// into slot i % kShmSlots and writes one byte on the socket; the consumer
// reads that byte, copies the chunk out and writes one byte back, which frees
// the slot. Both copies run at once on different slots (a pipeline), and a
// slot is small enough to be still in cache when the consumer reads it, so
// the two copies cost about one memcpy of main-memory bandwidth. The socket
// carries only these bytes, so a peer that dies closes it and the other
// side's read returns at once: a transfer never waits on a dead peer.
//
// The segment's size is sealed (F_SEAL_SHRINK/GROW), so neither side can
// truncate it under the other (a truncated mapping would fault on access).
// Functions here are thread-compatible: one thread uses a connection at a time.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace distflow {
namespace bulk_internal {

inline constexpr size_t kShmSlotBytes = size_t{512} << 10;
inline constexpr int kShmSlots = 8;
// Bounds a client accepts for a segment a server hands over.
inline constexpr size_t kShmMaxSlotBytes = size_t{64} << 20;
inline constexpr int kShmMaxSlots = 64;

// A mapped ring segment. Thread-compatible.
class ShmRing {
 public:
  // A new memfd segment, sealed against resizing, mapped (the server's side).
  static absl::StatusOr<std::unique_ptr<ShmRing>> Create(size_t slot_bytes, int slots);
  // Maps a segment received from a peer, taking `memfd` (closed on failure
  // too). DataLoss if its size or seals are not what a ring of this shape
  // needs.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Map(int memfd, size_t slot_bytes, int slots);
  ~ShmRing();  // unmaps and closes
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  int fd() const { return fd_; }
  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }
  char* slot(size_t i) const { return base_ + (i % static_cast<size_t>(slots_)) * slot_bytes_; }

 private:
  ShmRing(int fd, char* base, size_t slot_bytes, int slots)
      : fd_(fd), base_(base), slot_bytes_(slot_bytes), slots_(slots) {}
  const int fd_;
  char* const base_;
  const size_t slot_bytes_;
  const int slots_;
};

// The address of abstract socket `name` (no filesystem entry); its length.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr);

// Sends `n` bytes on `sock` with descriptor `fd` attached to the first.
// 0, or an errno.
int SendWithFd(int sock, const char* p, size_t n, int fd);
// Reads exactly `n` bytes; a descriptor that came with them goes to *fd
// (else -1). The bytes read; *err as for BulkReadAll (0 at the end of stream).
size_t ReadWithFd(int sock, char* p, size_t n, int* fd, int* err);

// Moves `n` bytes from `src` through `ring` to the peer's ShmConsume, with
// one byte per chunk each way on `sock`. Returns 0, or an errno (EPIPE or
// ECONNRESET when the peer went away, EAGAIN when it said nothing for the
// socket's receive timeout); *moved is the bytes the peer confirmed.
// `after_chunk` (may be null) runs after each chunk is announced (tests
// use it to stop a producer mid-transfer).
int ShmProduce(int sock, const ShmRing& ring, const char* src, size_t n, size_t* moved,
               void (*after_chunk)() = nullptr);
// The consumer's side: `n` bytes into `dst`; *moved is the bytes copied.
int ShmConsume(int sock, const ShmRing& ring, char* dst, size_t n, size_t* moved);

}  // namespace bulk_internal
}  // namespace distflow
