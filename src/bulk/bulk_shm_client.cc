// BulkClient's shared-memory side (see bulk_transfer.h and shm_channel.h):
// finds out with one identify request on a peer's TCP port whether the peer
// runs on this host and names a socket, then fetches and puts through a
// pooled shared-memory connection to it. Anything short of an answer from
// that socket falls back to TCP; once a transfer has started there, its
// failure is the transfer's (a dead peer is reported, never waited for).
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/bytes_copied.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_blocks.h"
#include "bulk/shm_channel.h"
#include "cluster/host_share.h"

namespace distflow {

using bulk_internal::CountBulkClientBytes;
using bulk_internal::GetU32;
using bulk_internal::GetU64;
using bulk_internal::kDirectDone;
using bulk_internal::kDirectMagic;
using bulk_internal::kDirectUseRing;
using bulk_internal::kHelloAccepted;
using bulk_internal::kHelloMagic;
using bulk_internal::kHelloRefused;
using bulk_internal::kIdentifyMagic;
using bulk_internal::kMagic;
using bulk_internal::kMappedMagic;
using bulk_internal::kPutMagic;
using bulk_internal::kUnknownTicket;
using bulk_internal::kVersion;
using bulk_internal::PeerName;
using bulk_internal::PutU32;
using bulk_internal::PutU64;
using bulk_internal::SetIdleTimeout;
using bulk_internal::ShmRing;

namespace {

// How long a peer's route (shared memory or TCP) is trusted before it is
// asked again (it may have restarted).
constexpr absl::Duration kRouteTtl = absl::Seconds(60);

Counter* ClientBytes(const char* transport, const char* direction) {
  return Metrics::Global()->GetCounter("distflow_bulk_client_bytes_total",
                                       "Bytes this process's bulk clients moved, by transport (shm or tcp) and "
                                       "direction (fetched or put)",
                                       {{"transport", transport}, {"direction", direction}});
}

Counter* ClientTransfers(const char* transport, const char* direction) {
  return Metrics::Global()->GetCounter("distflow_bulk_client_transfers_total",
                                       "Tensors this process's bulk clients moved, by transport (shm or tcp) and "
                                       "direction (fetched or put)",
                                       {{"transport", transport}, {"direction", direction}});
}

}  // namespace

void bulk_internal::CountBulkClientBytes(bool shm, bool fetched, size_t n) {
  static Counter* const counters[2][2] = {{ClientBytes("tcp", "put"), ClientBytes("tcp", "fetched")},
                                          {ClientBytes("shm", "put"), ClientBytes("shm", "fetched")}};
  static Counter* const transfers[2][2] = {{ClientTransfers("tcp", "put"), ClientTransfers("tcp", "fetched")},
                                           {ClientTransfers("shm", "put"), ClientTransfers("shm", "fetched")}};
  counters[shm ? 1 : 0][fetched ? 1 : 0]->Increment(static_cast<double>(n));
  transfers[shm ? 1 : 0][fetched ? 1 : 0]->Increment();
}

size_t BulkClient::NumPooledShmForTest() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (auto& [peer, conns] : shm_idle_) n += conns.size();
  return n;
}

absl::StatusOr<std::string> BulkClient::ShmSocketFor(const std::string& peer, const std::string& host, int port,
                                                     absl::Duration idle_timeout) {
  {
    absl::MutexLock lock(&mu_);
    auto it = shm_routes_.find(peer);
    if (it != shm_routes_.end() && Now() < it->second.until) return it->second.socket;
  }
  std::string socket;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool pooled = false;
    absl::StatusOr<BulkConn> conn = Acquire(peer, host, port, /*pooled_ok=*/attempt == 0, &pooled, idle_timeout);
    if (absl::IsDeadlineExceeded(conn.status())) return conn.status();
    if (!conn.ok()) break;  // the TCP transfer that follows reports it
    char req[16];
    PutU32(req, kIdentifyMagic);
    PutU32(req + 4, kVersion);
    PutU64(req + 8, 0);
    char len_bytes[4];
    int err = 0;
    if (BulkWriteAll(*conn, req, sizeof(req)) != 0 ||
        BulkReadAll(*conn, len_bytes, sizeof(len_bytes), &err) != sizeof(len_bytes) ||
        GetU32(len_bytes) > bulk_internal::kMaxIdentifyBytes) {
      CloseBulkConn(*conn);
      if (pooled) continue;  // stale: once more on a new connection
      break;                 // a server that does not identify itself: TCP
    }
    std::string answer(GetU32(len_bytes), '\0');
    if (!answer.empty() && BulkReadAll(*conn, answer.data(), answer.size(), &err) != answer.size()) {
      CloseBulkConn(*conn);
      break;
    }
    Release(peer, *conn);
    std::vector<std::string> parts = absl::StrSplit(answer, absl::MaxSplits('\n', 1));
    const std::string& mine = HostIdentity();
    if (parts.size() == 2 && !mine.empty() && parts[0] == mine) socket = parts[1];
    break;
  }
  absl::MutexLock lock(&mu_);
  shm_routes_[peer] = ShmRoute{socket, Now() + kRouteTtl};
  return socket;
}

absl::StatusOr<BulkClient::ShmConn> BulkClient::ShmConnect(const std::string& peer, const std::string& socket) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(std::strerror(errno));
  sockaddr_un addr;
  const socklen_t len = bulk_internal::AbstractAddress(socket, &addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    close(fd);
    // Not reachable from here (another network namespace, or the peer
    // restarted): NotFound, so the route turns to TCP for a while.
    return absl::NotFoundError(absl::StrCat("connect to @", socket, ": ", std::strerror(err)));
  }
  SetIdleTimeout(fd, absl::Seconds(20));  // the hello's bound; the transfer sets its own next
  std::string hello(12, '\0');
  PutU32(hello.data(), kHelloMagic);
  PutU32(hello.data() + 4, kVersion);
  PutU32(hello.data() + 8, static_cast<uint32_t>(auth_token_.size()));
  hello += auth_token_;
  const BulkConn conn{fd, nullptr};
  char answer[9] = {0};
  int memfd = -1, err = 0;
  if (int w = BulkWriteAll(conn, hello.data(), hello.size()); w != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("sending the hello: ", std::strerror(w)));
  }
  if (bulk_internal::ReadWithFd(fd, answer, 1, &memfd, &err) != 1) {
    if (memfd >= 0) close(memfd);
    close(fd);
    return absl::UnavailableError(err != 0 ? std::strerror(err) : "the peer closed the connection during the hello");
  }
  if (answer[0] != kHelloAccepted) {
    if (memfd >= 0) close(memfd);
    close(fd);
    if (answer[0] == kHelloRefused) {
      return absl::UnauthenticatedError(
          absl::StrCat("the shared-memory socket of ", peer, " refused ",
                       auth_token_.empty() ? "a connection without a cluster token" : "our cluster token",
                       ": give every task and client the same DISTFLOW_AUTH_TOKEN (or --auth_token_file)"));
    }
    return absl::UnavailableError("the peer serves no more shared-memory connections now");
  }
  int more_fd = -1;
  if (bulk_internal::ReadWithFd(fd, answer + 1, 8, &more_fd, &err) != 8) {
    if (memfd >= 0) close(memfd);
    if (more_fd >= 0) close(more_fd);
    close(fd);
    return absl::UnavailableError("the peer closed the connection during the hello");
  }
  if (memfd < 0) memfd = more_fd;
  absl::StatusOr<std::unique_ptr<ShmRing>> ring =
      ShmRing::Map(memfd, GetU32(answer + 1), static_cast<int>(GetU32(answer + 5)));
  if (!ring.ok()) {
    close(fd);
    return ring.status();
  }
  // The server's process, as the kernel saw it connect (not spoofable), for
  // direct reads; 0 if it is in a PID namespace we cannot see.
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  const int peer_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 ? cred.pid : 0;
  return ShmConn{fd, std::shared_ptr<ShmRing>(std::move(*ring)), peer_pid,
                 std::make_shared<bulk_internal::MappedBlocks>()};
}

absl::StatusOr<BulkClient::ShmConn> BulkClient::AcquireShm(const std::string& peer, const std::string& socket,
                                                           bool pooled_ok, bool* pooled) {
  *pooled = false;
  if (pooled_ok) {
    absl::MutexLock lock(&mu_);
    auto it = shm_idle_.find(peer);
    const absl::Time now = Now();
    while (it != shm_idle_.end() && !it->second.empty()) {
      ShmIdle idle = std::move(it->second.back());
      it->second.pop_back();
      if (now - idle.since > idle_close_) {
        close(idle.conn.fd);
        continue;
      }
      *pooled = true;
      return idle.conn;
    }
  }
  return ShmConnect(peer, socket);
}

void BulkClient::NoShmRoute(const std::string& peer, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (absl::IsNotFound(why)) {
    shm_routes_[peer] = ShmRoute{"", Now() + kRouteTtl};  // unreachable socket: TCP for a while
  } else {
    shm_routes_.erase(peer);  // busy, or a broken hello: TCP this time, ask again next time
  }
}

void BulkClient::ReleaseShm(const std::string& peer, ShmConn conn) {
  {
    absl::MutexLock lock(&mu_);
    std::vector<ShmIdle>& idle = shm_idle_[peer];
    if (idle.size() < kMaxIdlePerPeer) {
      idle.push_back(ShmIdle{std::move(conn), Now()});
      return;
    }
  }
  close(conn.fd);
}

namespace {

// Shuts a connection's socket down when its transfer is cancelled; the
// guard keeps the callback off the descriptor once it is released.
class CancelGuard {
 public:
  CancelGuard(CancellationManager* cm, int fd) : cm_(cm), state_(std::make_shared<State>()) {
    state_->fd = fd;
    if (cm_ == nullptr) return;
    token_ = cm_->Register([s = state_] {
      absl::MutexLock l(&s->mu);
      if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
    });
  }
  bool registered() const { return cm_ == nullptr || token_ != CancellationManager::kInvalidToken; }
  // True if the transfer was cancelled.
  bool Release() {
    const bool cancelled = cm_ != nullptr && token_ != CancellationManager::kInvalidToken && !cm_->Deregister(token_);
    absl::MutexLock l(&state_->mu);
    state_->fd = -1;
    return cancelled;
  }

 private:
  struct State {
    absl::Mutex mu;
    int fd ABSL_GUARDED_BY(mu) = -1;
  };
  CancellationManager* const cm_;
  std::shared_ptr<State> state_;
  CancellationManager::Token token_ = CancellationManager::kInvalidToken;
};

// The error of a transfer that broke after `moved` of `n` bytes.
absl::Status Broken(const std::string& what, int err, size_t moved, size_t n, absl::Duration idle_timeout) {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": the peer sent nothing for ",
                                                    absl::FormatDuration(idle_timeout), " after ", moved, " of ", n,
                                                    " bytes"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": the connection ended after ", moved, " of ", n, " bytes (",
                                             std::strerror(err), "): the task there died or stopped serving"));
}

// Reads `n` bytes at `remote` in process `pid` into `dst` (one copy, by
// the kernel). 0, or an errno.
int ReadDirect(int pid, uint64_t remote, char* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec local{dst + done, n - done};
    iovec peer{reinterpret_cast<void*>(static_cast<uintptr_t>(remote + done)), n - done};
    const ssize_t r = process_vm_readv(pid, &local, 1, &peer, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return EFAULT;
    done += static_cast<size_t>(r);
  }
  return 0;
}

}  // namespace

std::optional<absl::Status> BulkClient::FetchShm(const std::string& host, int port, uint64_t ticket, void* dst,
                                                 size_t n, CancellationManager* cm, absl::Duration idle_timeout) {
  const std::string peer = PeerName(host, port);
  const absl::StatusOr<std::string> route = ShmSocketFor(peer, host, port, idle_timeout);
  if (!route.ok()) {
    return absl::Status(route.status().code(),
                        absl::StrCat("Bulk transfer of ", n, " bytes from ", peer, ": ", route.status().message()));
  }
  if (route->empty()) return std::nullopt;
  const std::string& socket = *route;
  const std::string what = absl::StrCat("Shared-memory transfer of ", n, " bytes from ", peer);
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool pooled = false;
    absl::StatusOr<ShmConn> conn = AcquireShm(peer, socket, /*pooled_ok=*/attempt == 0, &pooled);
    if (absl::IsUnauthenticated(conn.status()))
      return absl::UnauthenticatedError(absl::StrCat(what, ": ", conn.status().message()));
    if (!conn.ok()) {
      NoShmRoute(peer, conn.status());
      return std::nullopt;
    }
    SetIdleTimeout(conn->fd, idle_timeout);
    CancelGuard guard(cm, conn->fd);
    if (!guard.registered()) {
      close(conn->fd);
      return absl::CancelledError(absl::StrCat(what, " cancelled before it started"));
    }
    // A direct get when asked for and the kernel may let us read the
    // server's memory; else a mapped get (the server answers with a block
    // or the ring); the ring alone when mapped gets are off.
    const bool direct = conn->peer_pid > 0 && shm_direct_.load(std::memory_order_relaxed);
    const bool mapped = !direct && shm_mapped_;
    const BulkConn c{conn->fd, nullptr};
    char req[16];
    PutU32(req, direct ? kDirectMagic : mapped ? kMappedMagic : kMagic);
    PutU32(req + 4, kVersion);
    PutU64(req + 8, ticket);
    char head[16];
    const size_t head_bytes = direct ? 16 : 8;
    int err = 0, memfd = -1;
    size_t moved = 0;
    bool read_direct = false;
    absl::Status status;
    bool stale = false;
    if (int w = BulkWriteAll(c, req, sizeof(req)); w != 0) {
      stale = pooled;
      status = Broken(what, w, 0, n, idle_timeout);
    } else if (size_t got =
                   mapped ? bulk_internal::ReadWithFd(conn->fd, head, 8, &memfd, &err) : BulkReadAll(c, head, 8, &err);
               got != 8) {
      stale = pooled && got == 0 && err != EAGAIN && err != EWOULDBLOCK;
      status = Broken(what, err != 0 ? err : ECONNRESET, 0, n, idle_timeout);
    } else if (uint64_t len = GetU64(head); len == kUnknownTicket) {
      status =
          absl::NotFoundError(absl::StrCat(what, ": the peer no longer holds the tensor (ticket unknown or expired)"));
    } else if (head_bytes > 8 && BulkReadAll(c, head + 8, 8, &err) != 8) {
      status = Broken(what, err != 0 ? err : ECONNRESET, 0, n, idle_timeout);
    } else if (len != n) {
      // The server holds the tensor for a direct or mapped get until we
      // answer: let it go (the connection is closed below).
      status = absl::DataLossError(absl::StrCat(what, ": the peer offers ", len, " bytes"));
    } else {
      bool use_ring = !direct && !mapped;
      if (mapped) {
        const bulk_internal::MappedReceipt r =
            bulk_internal::ReceiveMapped(conn->fd, *conn->blocks, memfd, static_cast<char*>(dst), n);
        memfd = -1;  // taken
        if (r.io_err != 0) {
          status = Broken(what, r.io_err, 0, n, idle_timeout);
        } else if (!r.bad.ok()) {
          status = absl::DataLossError(absl::StrCat(what, ": ", r.bad.message()));
        } else if (r.copied || r.tell_ring) {
          const char answer = r.copied ? kDirectDone : kDirectUseRing;
          if (int w = BulkWriteAll(c, &answer, 1); w != 0) status = Broken(what, w, r.copied ? n : 0, n, idle_timeout);
        }
        use_ring = r.ring;
      }
      if (direct) {
        const int e = shm_direct_denied_for_test_
                          ? EPERM
                          : ReadDirect(conn->peer_pid, GetU64(head + 8), static_cast<char*>(dst), n);
        if (e == EPERM || e == EACCES || e == ENOSYS) {
          // Not allowed here (another user, Yama, seccomp): the ring from now on.
          shm_direct_.store(false, std::memory_order_relaxed);
          LOG(INFO) << "Bulk transfer: reading a same-host peer's tensor directly is not allowed here ("
                    << std::strerror(e) << "); shared-memory transfers use the ring";
        }
        read_direct = e == 0;
        use_ring = !read_direct;
        const char answer = read_direct ? kDirectDone : kDirectUseRing;
        if (int w = BulkWriteAll(c, &answer, 1); w != 0) status = Broken(what, w, read_direct ? n : 0, n, idle_timeout);
      }
      if (status.ok() && use_ring) {
        if (int e = bulk_internal::ShmConsume(conn->fd, *conn->ring, static_cast<char*>(dst), n, &moved); e != 0)
          status = Broken(what, e, moved, n, idle_timeout);
      }
    }
    if (memfd >= 0) close(memfd);  // came with an answer not read to the end
    if (status.ok() && read_direct) {
      static Counter* copied = BytesCopiedCounter("shm_direct_read");
      copied->Increment(static_cast<double>(n));
    }
    const bool cancelled = guard.Release();
    if (cancelled) {
      close(conn->fd);
      return absl::CancelledError(absl::StrCat(what, " cancelled"));
    }
    if (status.ok()) {
      ReleaseShm(peer, std::move(*conn));
      CountBulkClientBytes(/*shm=*/true, /*fetched=*/true, n);
      return status;
    }
    // NotFound and DataLoss leave the connection in step: keep it.
    if (absl::IsNotFound(status) || absl::IsDataLoss(status)) {
      if (absl::IsNotFound(status))
        ReleaseShm(peer, std::move(*conn));
      else
        close(conn->fd);
      return status;
    }
    close(conn->fd);
    if (!stale) return status;
  }
  return absl::UnavailableError(absl::StrCat(what, ": the connection failed twice"));
}

std::optional<absl::StatusOr<uint64_t>> BulkClient::PutShm(const std::string& host, int port, const void* src, size_t n,
                                                           absl::Duration idle_timeout) {
  const std::string peer = PeerName(host, port);
  const absl::StatusOr<std::string> route = ShmSocketFor(peer, host, port, idle_timeout);
  if (!route.ok()) {
    return absl::Status(route.status().code(),
                        absl::StrCat("Bulk transfer of ", n, " bytes to ", peer, ": ", route.status().message()));
  }
  if (route->empty()) return std::nullopt;
  const std::string& socket = *route;
  const std::string what = absl::StrCat("Shared-memory transfer of ", n, " bytes to ", peer);
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool pooled = false;
    absl::StatusOr<ShmConn> conn = AcquireShm(peer, socket, /*pooled_ok=*/attempt == 0, &pooled);
    if (absl::IsUnauthenticated(conn.status()))
      return absl::UnauthenticatedError(absl::StrCat(what, ": ", conn.status().message()));
    if (!conn.ok()) {
      NoShmRoute(peer, conn.status());
      return std::nullopt;
    }
    SetIdleTimeout(conn->fd, idle_timeout);
    const BulkConn c{conn->fd, nullptr};
    char req[16];
    PutU32(req, kPutMagic);
    PutU32(req + 4, kVersion);
    PutU64(req + 8, n);
    char head[8];
    int err = 0;
    size_t moved = 0;
    if (int w = BulkWriteAll(c, req, sizeof(req)); w != 0) {
      close(conn->fd);
      if (pooled) continue;
      return Broken(what, w, 0, n, idle_timeout);
    }
    if (size_t got = BulkReadAll(c, head, sizeof(head), &err); got != sizeof(head)) {
      close(conn->fd);
      if (pooled && got == 0 && err != EAGAIN && err != EWOULDBLOCK) continue;
      return Broken(what, err != 0 ? err : ECONNRESET, 0, n, idle_timeout);
    }
    if (GetU64(head) == kUnknownTicket) {
      ReleaseShm(peer, std::move(*conn));
      return absl::ResourceExhaustedError(absl::StrCat(what, ": the peer could not allocate the buffer"));
    }
    if (int e = bulk_internal::ShmProduce(conn->fd, *conn->ring, static_cast<const char*>(src), n, &moved); e != 0) {
      close(conn->fd);
      return Broken(what, e, moved, n, idle_timeout);
    }
    if (BulkReadAll(c, head, sizeof(head), &err) != sizeof(head)) {
      close(conn->fd);
      return Broken(what, err != 0 ? err : ECONNRESET, n, n, idle_timeout);
    }
    ReleaseShm(peer, std::move(*conn));
    CountBulkClientBytes(/*shm=*/true, /*fetched=*/false, n);
    return GetU64(head);
  }
  return absl::UnavailableError(absl::StrCat(what, ": the connection failed twice"));
}

}  // namespace distflow
