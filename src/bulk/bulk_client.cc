// BulkClient: pooled connections to peers' bulk ports (see bulk_transfer.h).
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"

namespace distflow {

using bulk_internal::GetU64;
using bulk_internal::kHelloAccepted;
using bulk_internal::kHelloMagic;
using bulk_internal::kHelloRefused;
using bulk_internal::kMagic;
using bulk_internal::kPutMagic;
using bulk_internal::kUnknownTicket;
using bulk_internal::kVersion;
using bulk_internal::PeerName;
using bulk_internal::PutU32;
using bulk_internal::PutU64;
using bulk_internal::SetIdleTimeout;
using bulk_internal::SetNoDelay;

BulkClient::BulkClient(absl::Duration idle_close, std::string auth_token, std::shared_ptr<const BulkTls> tls,
                       Env* clock)
    : idle_close_(idle_close),
      auth_token_(std::move(auth_token)),
      tls_(std::move(tls)),
      clock_(clock != nullptr ? clock : Env::Default()) {
  const char* direct = std::getenv("DISTFLOW_SHM_DIRECT");
  shm_direct_.store(direct != nullptr && std::string(direct) == "1", std::memory_order_relaxed);
}

absl::Time BulkClient::Now() const { return absl::FromUnixMicros(clock_->NowMicros()); }

BulkClient::~BulkClient() {
  absl::MutexLock lock(&mu_);
  for (auto& [peer, conns] : idle_)
    for (const Idle& c : conns) CloseBulkConn(c.conn);
  for (auto& [peer, conns] : shm_idle_)
    for (const ShmIdle& c : conns) close(c.conn.fd);
}

void BulkClient::CloseExpired(absl::Time now) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    std::vector<Idle>& conns = it->second;
    auto keep = std::remove_if(conns.begin(), conns.end(), [&](const Idle& c) {
      if (now - c.since <= idle_close_) return false;
      CloseBulkConn(c.conn);
      return true;
    });
    conns.erase(keep, conns.end());
    if (conns.empty()) {
      idle_.erase(it++);
    } else {
      ++it;
    }
  }
}

size_t BulkClient::NumPooledForTest() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (auto& [peer, conns] : idle_) n += conns.size();
  return n;
}

absl::StatusOr<BulkConn> BulkClient::Connect(const std::string& host, int port, absl::Duration hello_timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect: ", last_error));
  SetNoDelay(fd);
  // The bound of the handshake and the hello (a peer may accept and never
  // answer); the caller sets its own next.
  SetIdleTimeout(fd, hello_timeout);
  BulkConn conn{fd, nullptr};
  if (tls_ != nullptr) {
    absl::StatusOr<ssl_st*> ssl = tls_->Connect(fd, host);
    if (!ssl.ok()) {
      close(fd);
      return absl::UnauthenticatedError(absl::StrCat("TLS: ", ssl.status().message()));
    }
    conn.ssl = *ssl;
  }
  // The hello: our cluster token; the server answers whether it accepts it.
  std::string hello(12, '\0');
  PutU32(hello.data(), kHelloMagic);
  PutU32(hello.data() + 4, kVersion);
  PutU32(hello.data() + 8, static_cast<uint32_t>(auth_token_.size()));
  hello += auth_token_;
  char answer = kHelloRefused;
  int err = BulkWriteAll(conn, hello.data(), hello.size());
  if (err == 0 && BulkReadAll(conn, &answer, 1, &err) != 1 && err == 0) err = ECONNRESET;
  if (err != 0 || answer != kHelloAccepted) {
    CloseBulkConn(conn);
    // Under TLS 1.3 the server judges our certificate after our side of the
    // handshake is done: its refusal arrives as an alert instead of the answer.
    if (err == EPROTO && conn.ssl != nullptr) {
      return absl::UnauthenticatedError(
          absl::StrCat("the bulk port refused our certificate (", LastBulkTlsError(),
                       "): a server given --tls_ca accepts only clients whose certificate that CA signed"));
    }
    if (err == EAGAIN || err == EWOULDBLOCK) {
      return absl::DeadlineExceededError(absl::StrCat(
          PeerName(host, port), " accepted the connection but did not answer the bulk hello within ",
          absl::FormatDuration(hello_timeout),
          ": the port is not a distflow bulk port (the task's --bulk_port; its log says \"bulk tensor transfer on "
          "port N\"), or the task there is stopped or hung"));
    }
    if (err != 0)
      return absl::UnavailableError(absl::StrCat("the bulk port closed during the hello: ", std::strerror(err)));
    return absl::UnauthenticatedError(absl::StrCat(
        "the bulk port refused ", auth_token_.empty() ? "a connection without a cluster token" : "our cluster token",
        ": give every task and client the same DISTFLOW_AUTH_TOKEN (or --auth_token_file)"));
  }
  return conn;
}

absl::Status BulkClient::Fetch(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                               CancellationManager* cm, absl::Duration idle_timeout) {
  if (shared_memory_) {
    std::optional<absl::Status> shm = FetchShm(host, port, ticket, dst, n, cm, idle_timeout);
    if (shm.has_value()) return *shm;
  }
  bool stale = false;
  absl::Status s = FetchOnce(host, port, ticket, dst, n, cm, idle_timeout, /*pooled_ok=*/true, &stale);
  // A pooled connection the peer has closed (it restarted, or idled out)
  // fails before any byte of the answer: try once more on a new one.
  if (stale) s = FetchOnce(host, port, ticket, dst, n, cm, idle_timeout, /*pooled_ok=*/false, &stale);
  if (s.ok()) bulk_internal::CountBulkClientBytes(/*shm=*/false, /*fetched=*/true, n);
  return s;
}

absl::Status BulkClient::FetchOnce(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                                   CancellationManager* cm, absl::Duration idle_timeout, bool pooled_ok, bool* stale) {
  *stale = false;
  const std::string peer = PeerName(host, port);
  auto fail = [&](absl::StatusCode code, const std::string& what) {
    return absl::Status(code, absl::StrCat("Bulk transfer of ", n, " bytes from ", peer, ": ", what,
                                           ". If a firewall blocks it, give the servers a --bulk_port it allows, "
                                           "or set DISTFLOW_BULK_TRANSFER=0 on every task."));
  };
  bool pooled = false;
  absl::StatusOr<BulkConn> acquired = Acquire(peer, host, port, pooled_ok, &pooled, idle_timeout);
  if (absl::IsUnauthenticated(acquired.status()) || absl::IsDeadlineExceeded(acquired.status())) {
    // A refused token or a silent peer: no firewall advice (the connection was made).
    return absl::Status(acquired.status().code(),
                        absl::StrCat("Bulk transfer of ", n, " bytes from ", peer, ": ", acquired.status().message()));
  }
  if (!acquired.ok()) return fail(absl::StatusCode::kUnavailable, std::string(acquired.status().message()));
  const BulkConn conn = *acquired;
  const int fd = conn.fd;
  SetIdleTimeout(fd, idle_timeout);

  // Cancellation shuts the socket down, which wakes a blocked recv. The guard
  // keeps the callback from touching the descriptor after it is released.
  struct Guard {
    absl::Mutex mu;
    int fd ABSL_GUARDED_BY(mu) = -1;
  };
  auto guard = std::make_shared<Guard>();
  {
    absl::MutexLock l(&guard->mu);
    guard->fd = fd;
  }
  CancellationManager::Token token = CancellationManager::kInvalidToken;
  if (cm != nullptr) {
    token = cm->Register([guard] {
      absl::MutexLock l(&guard->mu);
      if (guard->fd >= 0) shutdown(guard->fd, SHUT_RDWR);
    });
    if (token == CancellationManager::kInvalidToken) {
      CloseBulkConn(conn);
      return absl::CancelledError(absl::StrCat("Bulk transfer from ", peer, " cancelled before it started"));
    }
  }
  absl::Status status;
  char req[16];
  PutU32(req, kMagic);
  PutU32(req + 4, kVersion);
  PutU64(req + 8, ticket);
  char head[8];
  int err = 0;
  if (int w = BulkWriteAll(conn, req, sizeof(req)); w != 0) {
    *stale = pooled;
    status = fail(absl::StatusCode::kUnavailable, absl::StrCat("sending the request: ", std::strerror(w)));
  } else if (size_t got_head = BulkReadAll(conn, head, sizeof(head), &err); got_head != sizeof(head)) {
    *stale = pooled && got_head == 0 && err != EAGAIN && err != EWOULDBLOCK;
    status =
        fail(err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kUnavailable,
             err ? std::strerror(err) : "the peer closed the connection");
  } else if (uint64_t len = GetU64(head); len == kUnknownTicket) {
    status = fail(absl::StatusCode::kNotFound, "the peer no longer holds the tensor (ticket unknown or expired)");
  } else if (len != n) {
    status = fail(absl::StatusCode::kDataLoss, absl::StrCat("the peer offers ", len, " bytes"));
  } else if (size_t got = BulkReadAll(conn, static_cast<char*>(dst), n, &err); got != n) {
    status =
        fail(err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kDataLoss,
             absl::StrCat("the connection ended after ", got, " bytes",
                          err ? absl::StrCat(" (", std::strerror(err), ")") : std::string()));
  }
  bool cancelled = false;
  if (cm != nullptr && !cm->Deregister(token)) cancelled = true;
  {
    absl::MutexLock l(&guard->mu);
    guard->fd = -1;
  }
  if (cancelled) {
    *stale = false;
    CloseBulkConn(conn);
    return absl::CancelledError(absl::StrCat("Bulk transfer from ", peer, " cancelled"));
  }
  if (!status.ok()) {
    CloseBulkConn(conn);
    return status;
  }
  Release(peer, conn);
  return absl::OkStatus();
}

absl::StatusOr<BulkConn> BulkClient::Acquire(const std::string& peer, const std::string& host, int port, bool pooled_ok,
                                             bool* pooled, absl::Duration idle_timeout) {
  *pooled = false;
  if (pooled_ok) {
    absl::MutexLock lock(&mu_);
    CloseExpired(Now());
    auto it = idle_.find(peer);
    if (it != idle_.end() && !it->second.empty()) {
      BulkConn conn = it->second.back().conn;
      it->second.pop_back();
      *pooled = true;
      return conn;
    }
  }
  // (A zero bound would be none at all: SO_RCVTIMEO's 0 waits forever.)
  return Connect(host, port,
                 idle_timeout > absl::ZeroDuration() ? std::min(idle_timeout, kHelloTimeout) : kHelloTimeout);
}

void BulkClient::Release(const std::string& peer, BulkConn conn) {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = Now();
    CloseExpired(now);
    std::vector<Idle>& idle = idle_[peer];
    if (idle.size() < kMaxIdlePerPeer) {
      idle.push_back({conn, now});
      return;
    }
  }
  CloseBulkConn(conn);
}

absl::StatusOr<uint64_t> BulkClient::Put(const std::string& host, int port, const void* src, size_t n,
                                         absl::Duration idle_timeout) {
  if (shared_memory_) {
    std::optional<absl::StatusOr<uint64_t>> shm = PutShm(host, port, src, n, idle_timeout);
    if (shm.has_value()) return *shm;
  }
  const std::string peer = PeerName(host, port);
  auto fail = [&](absl::StatusCode code, const std::string& what) {
    return absl::Status(code, absl::StrCat("Bulk transfer of ", n, " bytes to ", peer, ": ", what,
                                           ". If a firewall blocks it, give the servers a --bulk_port it allows, "
                                           "or set DISTFLOW_BULK_TRANSFER=0."));
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool pooled = false;
    absl::StatusOr<BulkConn> acquired = Acquire(peer, host, port, /*pooled_ok=*/attempt == 0, &pooled, idle_timeout);
    if (absl::IsUnauthenticated(acquired.status()) || absl::IsDeadlineExceeded(acquired.status())) {
      return absl::Status(acquired.status().code(),
                          absl::StrCat("Bulk transfer of ", n, " bytes to ", peer, ": ", acquired.status().message()));
    }
    if (!acquired.ok()) return fail(absl::StatusCode::kUnavailable, std::string(acquired.status().message()));
    const BulkConn conn = *acquired;
    SetIdleTimeout(conn.fd, idle_timeout);
    char req[16];
    PutU32(req, kPutMagic);
    PutU32(req + 4, kVersion);
    PutU64(req + 8, n);
    char head[8];
    int err = 0;
    int w = BulkWriteAll(conn, req, sizeof(req));
    if (w == 0 && n > 0) w = BulkWriteAll(conn, static_cast<const char*>(src), n);
    size_t got = w == 0 ? BulkReadAll(conn, head, sizeof(head), &err) : 0;
    if (w == 0 && got == sizeof(head)) {
      uint64_t ticket = GetU64(head);
      if (ticket == kUnknownTicket) {
        CloseBulkConn(conn);
        return fail(absl::StatusCode::kResourceExhausted, "the peer could not allocate the buffer");
      }
      Release(peer, conn);
      bulk_internal::CountBulkClientBytes(/*shm=*/false, /*fetched=*/false, n);
      return ticket;
    }
    CloseBulkConn(conn);
    // A stale pooled connection (the peer restarted, or closed it to make
    // room for others) fails at once: one retry on a new one.
    if (pooled && (w != 0 || (got == 0 && err != EAGAIN && err != EWOULDBLOCK))) continue;
    if (w != 0) return fail(absl::StatusCode::kUnavailable, absl::StrCat("sending: ", std::strerror(w)));
    return fail(
        err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kUnavailable,
        err ? std::strerror(err) : "the peer closed the connection");
  }
  return fail(absl::StatusCode::kUnavailable, "the connection failed twice");
}

}  // namespace distflow
