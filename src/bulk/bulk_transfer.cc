#include "bulk/bulk_transfer.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "bulk/bulk_offers.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_channel.h"
#include "cluster/credentials.h"
#include "cluster/host_share.h"
#include "tensor/tensor_codec.h"

namespace distflow {
using bulk_internal::GetU32;
using bulk_internal::GetU64;
using bulk_internal::kHelloAccepted;
using bulk_internal::kHelloMagic;
using bulk_internal::kHelloRefused;
using bulk_internal::kIdentifyMagic;
using bulk_internal::kMagic;
using bulk_internal::kMaxTokenBytes;
using bulk_internal::kPutMagic;
using bulk_internal::kUnknownTicket;
using bulk_internal::kVersion;
using bulk_internal::PutU64;
using bulk_internal::SetIdleTimeout;
using bulk_internal::SetNoDelay;

bool BulkTransferEnabledByEnv() {
  const char* v = std::getenv("DISTFLOW_BULK_TRANSFER");
  return v == nullptr || std::string(v) != "0";
}

bool IsBulkCandidate(const Tensor& t) {
  return t.dtype() != DT_STRING && t.dtype() != DT_BOOL && t.TotalBytes() >= kBulkMinBytes;
}

void SetBulkNamedTensor(const std::string& name, const Tensor& t, uint64_t ticket, int port, proto::NamedTensor* out) {
  out->set_name(name);
  out->mutable_tensor()->set_dtype(static_cast<proto::DataType>(t.dtype()));
  EncodeShape(t.shape(), out->mutable_tensor()->mutable_shape());
  out->set_bulk_ticket(ticket);
  out->set_bulk_port(port);
}

void DropBulkFeeds(BulkServer& bulk, const proto::RunStepRequest& req) {
  for (const proto::NamedTensor& f : req.feed())
    if (f.bulk_ticket() != 0) bulk.DropReceived(f.bulk_ticket());
}

absl::StatusOr<std::pair<DataType, TensorShape>> BulkTensorSpec(const proto::NamedTensor& nt) {
  int raw = nt.tensor().dtype();
  if (!IsValidDataType(raw) || raw == DT_STRING || raw == DT_BOOL || raw == DT_INVALID) {
    return absl::DataLossError(absl::StrCat("Tensor '", nt.name(), "' announces bulk bytes with dtype ", raw));
  }
  absl::StatusOr<TensorShape> shape = DecodeShape(nt.tensor().shape());
  if (!shape.ok()) return absl::DataLossError(absl::StrCat("Tensor '", nt.name(), "': ", shape.status().message()));
  if (!nt.tensor().tensor_content().empty() || nt.tensor().string_val_size() > 0) {
    return absl::DataLossError(absl::StrCat("Tensor '", nt.name(), "' carries bytes and a bulk ticket"));
  }
  return std::make_pair(static_cast<DataType>(raw), *shape);
}

absl::StatusOr<std::unique_ptr<BulkServer>> BulkServer::Start(const std::string& host, absl::Duration offer_ttl,
                                                              int port, std::string auth_token,
                                                              std::shared_ptr<const BulkTls> tls, Timer* timer) {
  if (tls != nullptr && !tls->can_serve()) {
    return absl::InvalidArgumentError("Bulk transfer: TLS is on but this task has no certificate to serve with");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Bulk transfer: cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // a restart may rebind a port in TIME_WAIT
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("Bulk transfer: cannot listen on ", host, ": ", last_error));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int bound = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return std::unique_ptr<BulkServer>(
      new BulkServer(fd, bound, offer_ttl, std::move(auth_token), std::move(tls), timer));
}

namespace {
// The clock of the server's connection bookkeeping (which idle connection is
// the oldest) and of its refusal log's pacing.
absl::Time ServerNow() { return absl::FromUnixMicros(Env::Default()->NowMicros()); }

uint64_t HalfOfMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{4} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}
}  // namespace

BulkServer::BulkServer(int listen_fd, int port, absl::Duration ttl, std::string auth_token,
                       std::shared_ptr<const BulkTls> tls, Timer* timer)
    : listen_fd_(listen_fd),
      port_(port),
      ttl_(ttl),
      auth_token_(std::move(auth_token)),
      tls_(std::move(tls)),
      max_held_put_bytes_(HalfOfMemory()),
      max_held_offer_bytes_(HalfOfMemory()),
      offers_(std::make_shared<Offers>(timer != nullptr ? timer : Timer::Global())) {
  acceptor_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "df_bulk_accept");  // profiles tell the bulk server's threads apart
    AcceptLoop();
  });
}

BulkServer::~BulkServer() {
  StopSharedMemory();
  std::vector<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [fd, c] : open_) shutdown(fd, SHUT_RDWR);  // wakes their threads
  }
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    conns.swap(conns_);
  }
  for (Conn& c : conns) c.thread.join();
  close(listen_fd_);
  absl::MutexLock lock(&offers_->mu);
  for (auto& [ticket, offer] : offers_->map) offers_->timer->Cancel(offer.second);
  for (auto& [ticket, r] : offers_->received) offers_->timer->Cancel(r.timer);
  offers_->map.clear();
  offers_->received.clear();
}

uint64_t BulkServer::Offer(const Tensor& t) {
  const uint64_t n = t.TotalBytes();
  absl::MutexLock lock(&offers_->mu);
  const uint64_t limit = max_held_offer_bytes_.load(std::memory_order_relaxed);
  if (n > limit || offers_->held_offer_bytes > limit - n) return 0;
  offers_->held_offer_bytes += n;
  uint64_t ticket = offers_->NewTicket();
  offers_->map.emplace(ticket, std::make_pair(t, Offers::Expire(offers_, ticket, ttl_)));
  return ticket;
}

absl::StatusOr<Tensor> BulkServer::TakeReceived(uint64_t ticket, DataType dtype, const TensorShape& shape) {
  Offers::Received r;
  {
    absl::MutexLock lock(&offers_->mu);
    if (!offers_->EraseReceived(ticket, &r)) {
      return absl::NotFoundError(
          absl::StrCat("Bulk feed ticket ", ticket, " is unknown here (expired after the TTL, or already used)"));
    }
  }
  offers_->timer->Cancel(r.timer);
  size_t bytes = 0;
  if (dtype == DT_STRING || dtype == DT_BOOL ||
      __builtin_mul_overflow(static_cast<size_t>(shape.num_elements()), DataTypeSize(dtype), &bytes) ||
      bytes != r.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("Bulk feed of ", r.bytes, " bytes cannot be a ", DataTypeName(dtype),
                                                   " tensor of shape ", shape.DebugString()));
  }
  return Tensor::FromBuffer(dtype, shape, std::move(r.buffer), r.offset);
}

uint64_t BulkServer::PutLocal(const Tensor& t) {
  absl::MutexLock lock(&offers_->mu);
  uint64_t ticket = offers_->NewTicket();
  size_t offset =
      static_cast<size_t>(static_cast<const char*>(t.raw_data()) - static_cast<const char*>(t.buffer()->data()));
  offers_->received.emplace(ticket,
                            Offers::Received{t.buffer(), offset, t.TotalBytes(), /*local=*/true,
                                             Offers::Expire(offers_, ticket, std::min(ttl_, absl::Seconds(30)))});
  return ticket;
}

absl::StatusOr<Tensor> BulkServer::TakeOffer(uint64_t ticket) {
  Tensor t;
  if (!offers_->Take(ticket, &t)) {
    return absl::NotFoundError(
        absl::StrCat("Bulk ticket ", ticket, " is unknown here (expired after the TTL, or already taken)"));
  }
  return t;
}

void BulkServer::DropReceived(uint64_t ticket) {
  Offers::Received r;
  {
    absl::MutexLock lock(&offers_->mu);
    if (!offers_->EraseReceived(ticket, &r)) return;
  }
  offers_->timer->Cancel(r.timer);
}

size_t BulkServer::NumReceivedForTest() const {
  absl::MutexLock lock(&offers_->mu);
  return offers_->received.size();
}

size_t BulkServer::NumOffersForTest() const {
  absl::MutexLock lock(&offers_->mu);
  return offers_->map.size();
}

namespace {
// The numeric address of a connected socket's peer, without the port.
std::string PeerAddress(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, buf, sizeof(buf));
  } else if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, buf, sizeof(buf));
  }
  return buf;
}
}  // namespace

bool BulkServer::MakeRoom(const std::string& peer) {
  auto peer_count = [&](const std::string& p) {
    auto it = per_peer_.find(p);
    return it == per_peer_.end() ? 0 : it->second;
  };
  int live = 0;
  for (const auto& [fd, c] : open_) live += c.evicted ? 0 : 1;
  const bool peer_full = peer_count(peer) >= kMaxConnectionsPerPeer;
  if (live < kMaxConnections && !peer_full) return true;
  // The connection idle longest: the peer's own if the peer is over its
  // share, else anyone's.
  int victim = -1;
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [fd, c] : open_) {
    if (c.busy || c.evicted || (peer_full && c.peer != peer)) continue;
    if (c.idle_since < oldest) {
      oldest = c.idle_since;
      victim = fd;
    }
  }
  if (victim < 0) return false;
  Open& v = open_[victim];
  v.evicted = true;
  if (--per_peer_[v.peer] == 0) per_peer_.erase(v.peer);
  shutdown(victim, SHUT_RDWR);  // its thread wakes, ends and closes it
  evictions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool BulkServer::SetBusy(int fd, bool busy) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(fd);
  if (it == open_.end() || it->second.evicted) return false;
  it->second.busy = busy;
  if (!busy) it->second.idle_since = ServerNow();
  return true;
}

void BulkServer::AcceptLoop() {
  for (;;) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof(from);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      // Out of descriptors, or a network error of a pending connection that
      // accept reports (EPROTO, ENETUNREACH, EPERM...): keep serving.
      LOG(WARNING) << "Bulk transfer: accept failed: " << std::strerror(err) << "; retrying";
      Env::Default()->SleepForMicros(10000);
      continue;
    }
    const std::string peer = PeerAddress(from);
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    if (!MakeRoom(peer)) {
      if (const absl::Time now = ServerNow(); now - last_refusal_log_ > absl::Seconds(10)) {
        last_refusal_log_ = now;
        LOG(WARNING) << "Bulk transfer: refused a connection from " << peer << ": " << kMaxConnections
                     << " connections (" << kMaxConnectionsPerPeer
                     << " from one address) are all busy; the peer falls back to gRPC";
      }
      close(fd);
      continue;
    }
    SetNoDelay(fd);
    // A connection idle this long is closed (clients reconnect when a pooled
    // connection turns out closed), so idle pools cannot hold every slot.
    SetIdleTimeout(fd, kServerIdleTimeout);
    // Join the threads of connections that have ended (a joinable thread
    // keeps its stack until joined).
    for (size_t i = 0; i < conns_.size();) {
      if (conns_[i].finished->load()) {
        conns_[i].thread.join();
        conns_[i] = std::move(conns_.back());
        conns_.pop_back();
      } else {
        ++i;
      }
    }
    open_[fd] = Open{peer, ServerNow(), false, false};
    ++per_peer_[peer];
    auto finished = std::make_shared<std::atomic<bool>>(false);
    conns_.push_back(Conn{std::thread([this, fd, finished] {
                            pthread_setname_np(pthread_self(), "df_bulk_serve");
                            Serve(fd);
                            finished->store(true);
                          }),
                          finished});
  }
}

bool BulkServer::Handshake(BulkConn& conn) {
  const int fd = conn.fd;
  // A connection that says nothing gives up its slot soon (a peer's TLS
  // handshake and hello follow its connect at once).
  SetIdleTimeout(fd, kHelloTimeout);
  if (tls_ != nullptr) {
    absl::StatusOr<ssl_st*> ssl = tls_->Accept(fd);
    if (!ssl.ok()) {
      LOG(WARNING) << "Bulk transfer: closed a connection that failed the TLS handshake: " << ssl.status().message();
      return false;
    }
    conn.ssl = *ssl;
  }
  char hello[12];
  int err = 0;
  if (BulkReadAll(conn, hello, sizeof(hello), &err) != sizeof(hello)) return false;
  const uint32_t len = GetU32(hello + 8);
  if (GetU32(hello) != kHelloMagic || GetU32(hello + 4) != kVersion || len > kMaxTokenBytes) {
    LOG(WARNING) << "Bulk transfer: a connection that does not speak distflow's bulk protocol was closed";
    return false;
  }
  std::string token(len, '\0');
  if (len > 0 && BulkReadAll(conn, token.data(), len, &err) != len) return false;
  const bool ok = auth_token_.empty() || TokensEqual(token, auth_token_);
  SetIdleTimeout(fd, kServerIdleTimeout);
  const char answer = ok ? kHelloAccepted : kHelloRefused;
  (void)BulkWriteAll(conn, &answer, 1);
  if (!ok) {
    LOG(WARNING) << "Bulk transfer: refused a connection " << (len == 0 ? "without" : "with the wrong")
                 << " cluster token";
  }
  return ok;
}

void BulkServer::Serve(int fd) {
  BulkConn conn{fd, nullptr};
  // Nothing is read from a connection before its hello is accepted.
  for (const bool greeted = Handshake(conn); greeted;) {
    char req[16];
    int err = 0;
    if (BulkReadAll(conn, req, sizeof(req), &err) != sizeof(req)) break;  // peer closed or shut down
    // Evicted just now: the request is not served (the client retries on a
    // new connection, and an offer stays for it).
    if (!SetBusy(fd, true)) break;
    const uint32_t magic = GetU32(req);
    if (GetU32(req + 4) != kVersion || (magic != kMagic && magic != kPutMagic && magic != kIdentifyMagic)) {
      break;  // not our protocol
    }
    char head[8];
    if (magic == kIdentifyMagic) {
      std::string id = absl::StrCat(HostIdentity(), "\n", shm_socket_name());
      std::string answer(4, '\0');
      bulk_internal::PutU32(answer.data(), static_cast<uint32_t>(id.size()));
      answer += id;
      if (BulkWriteAll(conn, answer.data(), answer.size()) != 0) break;
      if (!SetBusy(fd, false)) break;
      continue;
    }
    if (magic == kPutMagic) {
      const uint64_t n = GetU64(req + 8);
      const bool reserved = offers_->Reserve(n, max_held_put_bytes_.load(std::memory_order_relaxed));
      absl::StatusOr<std::shared_ptr<TensorBuffer>> buf =
          reserved ? TensorBuffer::Allocate(DT_UINT8, static_cast<int64_t>(n))
                   : absl::StatusOr<std::shared_ptr<TensorBuffer>>(absl::ResourceExhaustedError("over budget"));
      if (!buf.ok()) {
        if (reserved) offers_->Unreserve(n);
        PutU64(head, kUnknownTicket);
        (void)BulkWriteAll(conn, head, sizeof(head));
        break;  // the bytes that follow cannot be stored: drop the connection
      }
      if (n > 0 && BulkReadAll(conn, static_cast<char*>((*buf)->data()), n, &err) != n) {
        offers_->Unreserve(n);
        break;  // truncated: drop it
      }
      const uint64_t ticket = Offers::Commit(offers_, std::move(*buf), n, std::min(ttl_, absl::Seconds(30)));
      bytes_received_.fetch_add(n, std::memory_order_relaxed);
      PutU64(head, ticket);
      if (BulkWriteAll(conn, head, sizeof(head)) != 0) break;
      if (!SetBusy(fd, false)) break;
      continue;
    }
    Tensor t;
    const uint64_t ticket = GetU64(req + 8);
    if (!offers_->Take(ticket, &t)) {
      PutU64(head, kUnknownTicket);
      if (BulkWriteAll(conn, head, sizeof(head)) != 0) break;
      if (!SetBusy(fd, false)) break;
      continue;
    }
    size_t n = t.TotalBytes();
    PutU64(head, n);
    // Counted before the write: the peer may finish reading (and look at the
    // counter) before this thread runs again. Taken back if the write fails,
    // and the offer is put back for the peer's fetch over gRPC.
    bytes_served_.fetch_add(n, std::memory_order_relaxed);
    if (BulkWriteAll(conn, head, sizeof(head)) != 0 ||
        (n > 0 && BulkWriteAll(conn, static_cast<const char*>(t.raw_data()), n) != 0)) {
      bytes_served_.fetch_sub(n, std::memory_order_relaxed);
      offers_->Restore(offers_, ticket, std::move(t), ttl_);
      break;
    }
    if (!SetBusy(fd, false)) break;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(fd);
    if (it != open_.end()) {
      if (!it->second.evicted && --per_peer_[it->second.peer] == 0) per_peer_.erase(it->second.peer);
      open_.erase(it);
    }
    CloseBulkConn(conn);  // under the lock: the number cannot be reused before it leaves open_
  }
}

}  // namespace distflow
