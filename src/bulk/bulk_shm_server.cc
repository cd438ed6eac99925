// BulkServer's shared-memory side (see bulk_transfer.h and shm_channel.h):
// an abstract Unix-domain socket whose connections get a ring segment once
// their hello carries the cluster token, then serve the same get and put
// requests as the TCP port, the bytes through the ring.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "bulk/bulk_offers.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_blocks.h"
#include "bulk/shm_channel.h"
#include "cluster/credentials.h"
#include "tensor/shared_blocks.h"

namespace distflow {

using bulk_internal::GetU32;
using bulk_internal::GetU64;
using bulk_internal::kDirectDone;
using bulk_internal::kDirectMagic;
using bulk_internal::kDirectUseRing;
using bulk_internal::kHelloAccepted;
using bulk_internal::kHelloBusy;
using bulk_internal::kHelloMagic;
using bulk_internal::kHelloRefused;
using bulk_internal::kMagic;
using bulk_internal::kMappedMagic;
using bulk_internal::kMaxTokenBytes;
using bulk_internal::kPutMagic;
using bulk_internal::kUnknownTicket;
using bulk_internal::kVersion;
using bulk_internal::PutU32;
using bulk_internal::PutU64;
using bulk_internal::SetIdleTimeout;
using bulk_internal::ShmRing;

bool SharedMemoryEnabledByEnv() {
  const char* v = std::getenv("DISTFLOW_SHM");
  return v == nullptr || std::string(v) != "0";
}

namespace {

// The ring's slot size for a connection opening now: kShmSlotBytes, or
// DISTFLOW_SHM_SLOT_KIB (a power of two from 64 KiB to kShmMaxSlotBytes) to
// measure another (docs/PERFORMANCE.md). Read per connection: they are rare.
size_t ShmSlotBytesFromEnv() {
  const char* v = std::getenv("DISTFLOW_SHM_SLOT_KIB");
  if (v == nullptr || *v == '\0') return bulk_internal::kShmSlotBytes;
  char* end = nullptr;
  const unsigned long long kib = std::strtoull(v, &end, 10);
  if (*end != '\0' || kib < 64 || kib > (bulk_internal::kShmMaxSlotBytes >> 10) || (kib & (kib - 1)) != 0) {
    LOG(WARNING) << "DISTFLOW_SHM_SLOT_KIB=" << v << " is not a power of two from 64 to "
                 << (bulk_internal::kShmMaxSlotBytes >> 10) << "; the ring keeps its "
                 << (bulk_internal::kShmSlotBytes >> 10) << " KiB slots";
    return bulk_internal::kShmSlotBytes;
  }
  return static_cast<size_t>(kib) << 10;
}

}  // namespace

absl::Status BulkServer::EnableSharedMemory() {
  if (tls_ != nullptr && auth_token_.empty()) {
    return absl::FailedPreconditionError(
        "shared memory between tasks on one host is off: TLS is on but no cluster token is set, and the token is "
        "what authenticates a local peer (set DISTFLOW_AUTH_TOKEN or --auth_token_file on every task)");
  }
  absl::MutexLock lock(&mu_);
  if (!shm_name_.empty()) return absl::OkStatus();
  // Large tensors made from now on lie in blocks same-host peers can copy
  // from (mapped gets); where that is off, the ring serves them all.
  shared_blocks::Enable();
  const std::string name = absl::StrCat("distflow-bulk.", getpid(), ".", port_, ".",
                                        absl::Hex(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)));
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("Unix-domain socket: ", std::strerror(errno)));
  sockaddr_un addr;
  const socklen_t len = bulk_internal::AbstractAddress(name, &addr);
  int pipe_fds[2];
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, SOMAXCONN) != 0 ||
      pipe2(pipe_fds, O_CLOEXEC) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("listening on the abstract socket @", name, ": ", std::strerror(err)));
  }
  shm_name_ = name;
  shm_listen_fd_ = fd;
  shm_stop_fd_ = pipe_fds[1];
  const int stop_read = pipe_fds[0];
  shm_acceptor_ = std::thread([this, fd, stop_read] {
    pthread_setname_np(pthread_self(), "df_shm_accept");
    ShmAcceptLoop(fd, stop_read);
  });
  return absl::OkStatus();
}

void BulkServer::StopSharedMemory() {
  std::vector<Conn> conns;
  int listen_fd = -1, stop_fd = -1;
  {
    absl::MutexLock lock(&mu_);
    if (shm_listen_fd_ < 0) return;
    listen_fd = shm_listen_fd_;
    stop_fd = shm_stop_fd_;
    shm_name_.clear();  // identify answers stop naming it
    for (const auto& [fd, serving] : shm_open_) shutdown(fd, SHUT_RDWR);
  }
  (void)!write(stop_fd, "x", 1);  // wakes the accept loop, which closes the read end
  shm_acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [fd, serving] : shm_open_) shutdown(fd, SHUT_RDWR);  // accepted meanwhile
    conns.swap(shm_conns_);
    shm_listen_fd_ = shm_stop_fd_ = -1;
  }
  for (Conn& c : conns) c.thread.join();
  close(listen_fd);
  close(stop_fd);
}

void BulkServer::ShmAcceptLoop(int listen_fd, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents != 0) break;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    // Join the threads of connections that have ended.
    for (size_t i = 0; i < shm_conns_.size();) {
      if (shm_conns_[i].finished->load()) {
        shm_conns_[i].thread.join();
        shm_conns_[i] = std::move(shm_conns_.back());
        shm_conns_.pop_back();
      } else {
        ++i;
      }
    }
    shm_open_[fd] = true;
    auto finished = std::make_shared<std::atomic<bool>>(false);
    shm_conns_.push_back(Conn{std::thread([this, fd, finished] {
                                pthread_setname_np(pthread_self(), "df_shm_serve");
                                ServeShm(fd);
                                finished->store(true);
                              }),
                              finished});
  }
  close(stop_fd);
}

void BulkServer::ServeShm(int fd) {
  const BulkConn conn{fd, nullptr};
  std::unique_ptr<ShmRing> ring;
  // The hello, as on TCP; nothing is handed over before its token passes.
  SetIdleTimeout(fd, kHelloTimeout);
  char hello[12];
  int err = 0;
  bool greeted = false;
  if (BulkReadAll(conn, hello, sizeof(hello), &err) == sizeof(hello) && GetU32(hello) == kHelloMagic &&
      GetU32(hello + 4) == kVersion && GetU32(hello + 8) <= kMaxTokenBytes) {
    const uint32_t len = GetU32(hello + 8);
    std::string token(len, '\0');
    if (len == 0 || BulkReadAll(conn, token.data(), len, &err) == len) {
      if (!auth_token_.empty() && !TokensEqual(token, auth_token_)) {
        LOG(WARNING) << "Bulk transfer: refused a shared-memory connection "
                     << (len == 0 ? "without" : "with the wrong") << " cluster token";
        const char no = kHelloRefused;
        (void)BulkWriteAll(conn, &no, 1);
      } else {
        bool room = false;
        {
          absl::MutexLock lock(&mu_);
          room = shm_open_.size() <= static_cast<size_t>(kMaxShmConnections);
        }
        absl::StatusOr<std::unique_ptr<ShmRing>> made =
            room ? ShmRing::Create(ShmSlotBytesFromEnv(), bulk_internal::kShmSlots)
                 : absl::StatusOr<std::unique_ptr<ShmRing>>(absl::ResourceExhaustedError("full"));
        if (made.ok()) {
          ring = std::move(*made);
          char answer[9];
          answer[0] = kHelloAccepted;
          PutU32(answer + 1, static_cast<uint32_t>(ring->slot_bytes()));
          PutU32(answer + 5, static_cast<uint32_t>(ring->slots()));
          greeted = bulk_internal::SendWithFd(fd, answer, sizeof(answer), ring->fd()) == 0;
        } else {
          if (room) LOG(WARNING) << "Bulk transfer: no shared-memory segment: " << made.status().message();
          const char busy = kHelloBusy;
          (void)BulkWriteAll(conn, &busy, 1);
        }
      }
    }
  }
  SetIdleTimeout(fd, kServerIdleTimeout);
  bulk_internal::SentBlocks sent;  // the blocks this connection's client has mapped
  while (greeted) {
    char req[16];
    if (BulkReadAll(conn, req, sizeof(req), &err) != sizeof(req)) break;  // peer closed or shut down
    const uint32_t magic = GetU32(req);
    if (GetU32(req + 4) != kVersion ||
        (magic != kMagic && magic != kPutMagic && magic != kDirectMagic && magic != kMappedMagic))
      break;  // not our protocol
    const uint64_t n = GetU64(req + 8);
    char head[8];
    if (magic == kPutMagic) {
      // Refused puts keep the connection: no byte moves before our "go" (0).
      const bool reserved = offers_->Reserve(n, max_held_put_bytes_.load(std::memory_order_relaxed));
      absl::StatusOr<std::shared_ptr<TensorBuffer>> buf =
          reserved ? TensorBuffer::Allocate(DT_UINT8, static_cast<int64_t>(n))
                   : absl::StatusOr<std::shared_ptr<TensorBuffer>>(absl::ResourceExhaustedError("over budget"));
      if (!buf.ok()) {
        if (reserved) offers_->Unreserve(n);
        PutU64(head, kUnknownTicket);
        if (BulkWriteAll(conn, head, sizeof(head)) != 0) break;
        continue;
      }
      PutU64(head, 0);
      size_t moved = 0;
      if (BulkWriteAll(conn, head, sizeof(head)) != 0 ||
          bulk_internal::ShmConsume(fd, *ring, static_cast<char*>((*buf)->data()), n, &moved) != 0) {
        offers_->Unreserve(n);
        break;
      }
      const uint64_t ticket = Offers::Commit(offers_, std::move(*buf), n, std::min(ttl_, absl::Seconds(30)));
      bytes_received_.fetch_add(n, std::memory_order_relaxed);
      shm_bytes_received_.fetch_add(n, std::memory_order_relaxed);
      PutU64(head, ticket);
      if (BulkWriteAll(conn, head, sizeof(head)) != 0) break;
      continue;
    }
    Tensor t;
    if (!offers_->Take(n, &t)) {
      PutU64(head, kUnknownTicket);
      if (BulkWriteAll(conn, head, sizeof(head)) != 0) break;
      continue;
    }
    const size_t bytes = t.TotalBytes();
    PutU64(head, bytes);
    // Counted first, as on TCP (the peer may look before this thread runs on).
    bytes_served_.fetch_add(bytes, std::memory_order_relaxed);
    shm_bytes_served_.fetch_add(bytes, std::memory_order_relaxed);
    size_t moved = 0;
    bool failed = false;
    if (magic == kMappedMagic) {
      // A tensor in a shared block: the peer copies it out of the block and
      // `t` is held (as for a direct get) until it says it is done; else
      // the ring.
      const bulk_internal::SentBlocks::Answer a = sent.Plan(t.raw_data(), bytes);
      const std::vector<char> answer = bulk_internal::EncodeMappedAnswer(bytes, a);
      failed = (a.fd >= 0 ? bulk_internal::SendWithFd(fd, answer.data(), answer.size(), a.fd)
                          : BulkWriteAll(conn, answer.data(), answer.size())) != 0;
      if (!failed && a.mapped) {
        char done = 0;
        failed = BulkReadAll(conn, &done, 1, &err) != 1 || (done != kDirectDone && done != kDirectUseRing);
        if (!failed && done == kDirectDone) continue;  // `t` is released here
        if (!failed) sent.Forget(a.id);                // the peer could not map it
      }
      failed = failed || bulk_internal::ShmProduce(fd, *ring, static_cast<const char*>(t.raw_data()), bytes, &moved,
                                                   shm_chunk_hook_) != 0;
    } else if (magic == kDirectMagic) {
      // The peer reads the bytes from `t`'s memory itself; `t` is held (so
      // neither freed nor, for a variable, updated in place: copy-on-write)
      // until it says it is done.
      char answer[16];
      PutU64(answer, bytes);
      PutU64(answer + 8, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.raw_data())));
      char done = 0;
      failed = BulkWriteAll(conn, answer, sizeof(answer)) != 0 || BulkReadAll(conn, &done, 1, &err) != 1 ||
               (done != kDirectDone && done != kDirectUseRing);
      if (!failed && done == kDirectDone) continue;  // `t` is released here
      failed = failed || bulk_internal::ShmProduce(fd, *ring, static_cast<const char*>(t.raw_data()), bytes, &moved,
                                                   shm_chunk_hook_) != 0;
    } else {
      failed = BulkWriteAll(conn, head, sizeof(head)) != 0 ||
               bulk_internal::ShmProduce(fd, *ring, static_cast<const char*>(t.raw_data()), bytes, &moved,
                                         shm_chunk_hook_) != 0;
    }
    if (failed) {
      bytes_served_.fetch_sub(bytes, std::memory_order_relaxed);
      shm_bytes_served_.fetch_sub(bytes, std::memory_order_relaxed);
      offers_->Restore(offers_, n, std::move(t), ttl_);  // the peer may ask again over gRPC
      break;
    }
  }
  ring.reset();
  absl::MutexLock lock(&mu_);
  shm_open_.erase(fd);
  close(fd);  // under the lock: the number cannot be reused before it leaves shm_open_
}

}  // namespace distflow
