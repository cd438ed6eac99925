#include "bulk/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/bytes_copied.h"

namespace distflow {
namespace bulk_internal {

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Create(size_t slot_bytes, int slots) {
  const size_t bytes = slot_bytes * static_cast<size_t>(slots);
  int fd = memfd_create("distflow-bulk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("sizing a shared-memory segment of ", bytes, " bytes: ", std::strerror(err)));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("mapping a shared-memory segment: ", std::strerror(err)));
  }
  return std::unique_ptr<ShmRing>(new ShmRing(fd, static_cast<char*>(base), slot_bytes, slots));
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Map(int memfd, size_t slot_bytes, int slots) {
  auto refuse = [memfd](const std::string& why) {
    if (memfd >= 0) close(memfd);
    return absl::DataLossError(absl::StrCat("the peer's shared-memory segment is unusable: ", why));
  };
  if (memfd < 0) return refuse("no descriptor came with the answer");
  if (slot_bytes == 0 || slot_bytes > kShmMaxSlotBytes || slots <= 0 || slots > kShmMaxSlots) {
    return refuse(absl::StrCat("a ring of ", slots, " slots of ", slot_bytes, " bytes is out of bounds"));
  }
  const size_t bytes = slot_bytes * static_cast<size_t>(slots);
  struct stat st {};
  if (fstat(memfd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != bytes) {
    return refuse(absl::StrCat("its size is not the ", bytes, " bytes announced"));
  }
  const int seals = fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return refuse("it is not sealed against resizing");
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (base == MAP_FAILED) return refuse(absl::StrCat("mmap: ", std::strerror(errno)));
  return std::unique_ptr<ShmRing>(new ShmRing(memfd, static_cast<char*>(base), slot_bytes, slots));
}

ShmRing::~ShmRing() {
  munmap(base_, slot_bytes_ * static_cast<size_t>(slots_));
  close(fd_);
}

socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] == 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

int SendWithFd(int sock, const char* p, size_t n, int fd) {
  iovec iov{const_cast<char*>(p), n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t w;
  do {
    w = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w < 0) return errno;
  if (static_cast<size_t>(w) == n) return 0;
  // The rest goes without the descriptor.
  for (size_t done = static_cast<size_t>(w); done < n;) {
    ssize_t more = send(sock, p + done, n - done, MSG_NOSIGNAL);
    if (more < 0 && errno == EINTR) continue;
    if (more <= 0) return more < 0 ? errno : EPIPE;
    done += static_cast<size_t>(more);
  }
  return 0;
}

size_t ReadWithFd(int sock, char* p, size_t n, int* fd, int* err) {
  *fd = -1;
  *err = 0;
  size_t done = 0;
  while (done < n) {
    iovec iov{p + done, n - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *err = errno;
      break;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got = -1;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (*fd < 0) {
          *fd = got;
        } else {
          close(got);  // more than the one we expect: not ours to keep
        }
      }
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

namespace {

// Reads between 1 and `most` bytes (the peer's chunk signals); the count,
// or -errno (-ECONNRESET at the end of stream).
ssize_t ReadSignals(int sock, size_t most) {
  char buf[kShmMaxSlots];
  for (;;) {
    ssize_t r = recv(sock, buf, std::min(most, sizeof(buf)), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) return -ECONNRESET;
    return r;
  }
}

// Bytes copied into and out of ring slots (each side counts its own).
Counter* RingCopied() {
  static Counter* const c = BytesCopiedCounter("shm_ring");
  return c;
}

int Signal(int sock) {
  const char one = 1;
  for (;;) {
    ssize_t w = send(sock, &one, 1, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    return w == 1 ? 0 : EPIPE;
  }
}

}  // namespace

int ShmProduce(int sock, const ShmRing& ring, const char* src, size_t n, size_t* moved, void (*after_chunk)()) {
  *moved = 0;
  const size_t slot = ring.slot_bytes();
  const size_t slots = static_cast<size_t>(ring.slots());
  const size_t chunks = (n + slot - 1) / slot;
  size_t sent = 0, acked = 0;
  auto take_acks = [&](size_t need_outstanding_below) {
    while (sent - acked >= need_outstanding_below && sent > acked) {
      ssize_t r = ReadSignals(sock, sent - acked);
      if (r < 0) return static_cast<int>(-r);
      acked += static_cast<size_t>(r);
    }
    return 0;
  };
  while (sent < chunks) {
    if (int e = take_acks(slots); e != 0) {
      *moved = std::min(n, acked * slot);
      return e;
    }
    const size_t off = sent * slot;
    const size_t len = std::min(slot, n - off);
    std::memcpy(ring.slot(sent), src + off, len);
    RingCopied()->Increment(static_cast<double>(len));
    if (int e = Signal(sock); e != 0) {
      *moved = std::min(n, acked * slot);
      return e;
    }
    ++sent;
    if (after_chunk != nullptr) after_chunk();
  }
  int e = take_acks(1);  // every slot back: the peer has all the bytes
  *moved = std::min(n, acked * slot);
  return e;
}

int ShmConsume(int sock, const ShmRing& ring, char* dst, size_t n, size_t* moved) {
  *moved = 0;
  const size_t slot = ring.slot_bytes();
  const size_t chunks = (n + slot - 1) / slot;
  size_t ready = 0;
  for (size_t i = 0; i < chunks; ++i) {
    if (ready <= i) {
      ssize_t r = ReadSignals(sock, chunks - ready);
      if (r < 0) return static_cast<int>(-r);
      ready += static_cast<size_t>(r);
    }
    const size_t off = i * slot;
    const size_t len = std::min(slot, n - off);
    std::memcpy(dst + off, ring.slot(i), len);
    RingCopied()->Increment(static_cast<double>(len));
    *moved = off + len;
    if (int e = Signal(sock); e != 0) return e;
  }
  return 0;
}

}  // namespace bulk_internal
}  // namespace distflow
