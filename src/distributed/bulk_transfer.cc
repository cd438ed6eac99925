#include "distributed/bulk_transfer.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

constexpr uint32_t kMagic = 0x4B424644;     // "DFBK" little-endian: get
constexpr uint32_t kPutMagic = 0x50424644;  // "DFBP": put
constexpr uint32_t kVersion = 1;
constexpr uint64_t kUnknownTicket = ~uint64_t{0};

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// 0 on success, else errno (EPIPE-like for a closed peer).
int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EPIPE;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// Returns bytes read before EOF or an error (errno in *err, 0 for EOF).
size_t ReadAll(int fd, char* p, size_t n, int* err) {
  size_t done = 0;
  *err = 0;
  while (done < n) {
    ssize_t r = recv(fd, p + done, n - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *err = errno;
      return done;
    }
    if (r == 0) return done;
    done += static_cast<size_t>(r);
  }
  return done;
}

std::string PeerName(const std::string& host, int port) {
  return absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":", port);
}

void SetIdleTimeout(int fd, absl::Duration idle_timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(idle_timeout));
  tv.tv_usec = static_cast<suseconds_t>(absl::ToInt64Microseconds(idle_timeout) % 1000000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

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

// The offered tensors; shared with expiry closures so they never outlive it.
struct BulkServer::Offers {
  struct Received {
    std::shared_ptr<TensorBuffer> buffer;
    size_t bytes = 0;
    Timer::Id timer = 0;
  };
  absl::Mutex mu;
  absl::flat_hash_map<uint64_t, std::pair<Tensor, Timer::Id>> map ABSL_GUARDED_BY(mu);  // to send
  absl::flat_hash_map<uint64_t, Received> received ABSL_GUARDED_BY(mu);                 // put by peers
  uint64_t held_put_bytes ABSL_GUARDED_BY(mu) = 0;  // reserved by puts in flight and held in `received`
  std::mt19937_64 gen ABSL_GUARDED_BY(mu){std::random_device{}()};

  uint64_t NewTicket() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    uint64_t ticket = 0;
    do {
      ticket = gen();
    } while (ticket == 0 || ticket == kUnknownTicket || map.contains(ticket) || received.contains(ticket));
    return ticket;
  }

  // Drops the ticket from whichever table holds it once `ttl` has passed.
  static Timer::Id Expire(const std::shared_ptr<Offers>& self, uint64_t ticket, absl::Duration ttl) {
    std::weak_ptr<Offers> weak = self;
    return Timer::Global()->After(ttl, [weak, ticket] {
      if (std::shared_ptr<Offers> o = weak.lock()) {
        absl::MutexLock l(&o->mu);
        o->map.erase(ticket);
        o->EraseReceived(ticket);
      }
    });
  }

  // Removes a put and releases its bytes from the budget; false if unknown.
  bool EraseReceived(uint64_t ticket, Received* out = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = received.find(ticket);
    if (it == received.end()) return false;
    held_put_bytes -= it->second.bytes;
    if (out != nullptr) *out = std::move(it->second);
    received.erase(it);
    return true;
  }

  bool Take(uint64_t ticket, Tensor* out) {
    Timer::Id timer = 0;
    {
      absl::MutexLock lock(&mu);
      auto it = map.find(ticket);
      if (it == map.end()) return false;
      *out = std::move(it->second.first);
      timer = it->second.second;
      map.erase(it);
    }
    Timer::Global()->Cancel(timer);
    return true;
  }
};

absl::StatusOr<std::unique_ptr<BulkServer>> BulkServer::Start(const std::string& host, absl::Duration offer_ttl,
                                                              int port) {
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
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) break;
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
  return std::unique_ptr<BulkServer>(new BulkServer(fd, bound, offer_ttl));
}

namespace {
uint64_t HalfOfMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{4} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}
}  // namespace

BulkServer::BulkServer(int listen_fd, int port, absl::Duration ttl)
    : listen_fd_(listen_fd),
      port_(port),
      ttl_(ttl),
      max_held_put_bytes_(HalfOfMemory()),
      offers_(std::make_shared<Offers>()) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

BulkServer::~BulkServer() {
  std::vector<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);  // wakes their threads
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
  for (auto& [ticket, offer] : offers_->map) Timer::Global()->Cancel(offer.second);
  for (auto& [ticket, r] : offers_->received) Timer::Global()->Cancel(r.timer);
  offers_->map.clear();
  offers_->received.clear();
}

uint64_t BulkServer::Offer(const Tensor& t) {
  absl::MutexLock lock(&offers_->mu);
  uint64_t ticket = offers_->NewTicket();
  offers_->map.emplace(ticket, std::make_pair(t, Offers::Expire(offers_, ticket, ttl_)));
  return ticket;
}

absl::StatusOr<Tensor> BulkServer::TakeReceived(uint64_t ticket, DataType dtype, const TensorShape& shape) {
  Offers::Received r;
  {
    absl::MutexLock lock(&offers_->mu);
    if (!offers_->EraseReceived(ticket, &r)) {
      return absl::NotFoundError(absl::StrCat("Bulk feed ticket ", ticket,
                                              " is unknown here (expired after the TTL, or already used)"));
    }
  }
  Timer::Global()->Cancel(r.timer);
  size_t bytes = 0;
  if (dtype == DT_STRING || dtype == DT_BOOL ||
      __builtin_mul_overflow(static_cast<size_t>(shape.num_elements()), DataTypeSize(dtype), &bytes) ||
      bytes != r.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("Bulk feed of ", r.bytes, " bytes cannot be a ", DataTypeName(dtype),
                                                   " tensor of shape ", shape.DebugString()));
  }
  return Tensor::FromBuffer(dtype, shape, std::move(r.buffer), 0);
}

void BulkServer::DropReceived(uint64_t ticket) {
  Offers::Received r;
  {
    absl::MutexLock lock(&offers_->mu);
    if (!offers_->EraseReceived(ticket, &r)) return;
  }
  Timer::Global()->Cancel(r.timer);
}

size_t BulkServer::NumReceivedForTest() const {
  absl::MutexLock lock(&offers_->mu);
  return offers_->received.size();
}

size_t BulkServer::NumOffersForTest() const {
  absl::MutexLock lock(&offers_->mu);
  return offers_->map.size();
}

void BulkServer::AcceptLoop() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
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
      usleep(10000);
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (stopping_ || static_cast<int>(fds_.size()) >= kMaxConnections) {
      close(fd);
      if (stopping_) return;
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
    fds_.push_back(fd);
    auto finished = std::make_shared<std::atomic<bool>>(false);
    conns_.push_back(Conn{std::thread([this, fd, finished] {
                            Serve(fd);
                            finished->store(true);
                          }),
                          finished});
  }
}

void BulkServer::Serve(int fd) {
  for (;;) {
    char req[16];
    int err = 0;
    if (ReadAll(fd, req, sizeof(req), &err) != sizeof(req)) break;  // peer closed or shut down
    const uint32_t magic = GetU32(req);
    if (GetU32(req + 4) != kVersion || (magic != kMagic && magic != kPutMagic)) break;  // not our protocol
    char head[8];
    if (magic == kPutMagic) {
      const uint64_t n = GetU64(req + 8);
      bool reserved = false;
      {
        absl::MutexLock lock(&offers_->mu);
        if (n <= max_held_put_bytes_ && offers_->held_put_bytes <= max_held_put_bytes_ - n) {
          offers_->held_put_bytes += n;
          reserved = true;
        }
      }
      absl::StatusOr<std::shared_ptr<TensorBuffer>> buf =
          reserved ? TensorBuffer::Allocate(DT_UINT8, static_cast<int64_t>(n))
                   : absl::StatusOr<std::shared_ptr<TensorBuffer>>(absl::ResourceExhaustedError("over budget"));
      auto unreserve = [&] {
        absl::MutexLock lock(&offers_->mu);
        offers_->held_put_bytes -= n;
      };
      if (!buf.ok()) {
        if (reserved) unreserve();
        PutU64(head, kUnknownTicket);
        (void)WriteAll(fd, head, sizeof(head));
        break;  // the bytes that follow cannot be stored: drop the connection
      }
      if (n > 0 && ReadAll(fd, static_cast<char*>((*buf)->data()), n, &err) != n) {
        unreserve();
        break;  // truncated: drop it
      }
      uint64_t ticket = 0;
      {
        absl::MutexLock lock(&offers_->mu);
        ticket = offers_->NewTicket();
        offers_->received.emplace(
            ticket, Offers::Received{std::move(*buf), n,
                                     Offers::Expire(offers_, ticket, std::min(ttl_, absl::Seconds(30)))});
      }
      bytes_received_.fetch_add(n, std::memory_order_relaxed);
      PutU64(head, ticket);
      if (WriteAll(fd, head, sizeof(head)) != 0) break;
      continue;
    }
    Tensor t;
    if (!offers_->Take(GetU64(req + 8), &t)) {
      PutU64(head, kUnknownTicket);
      if (WriteAll(fd, head, sizeof(head)) != 0) break;
      continue;
    }
    size_t n = t.TotalBytes();
    PutU64(head, n);
    if (WriteAll(fd, head, sizeof(head)) != 0) break;
    if (n > 0 && WriteAll(fd, static_cast<const char*>(t.raw_data()), n) != 0) break;
    bytes_served_.fetch_add(n, std::memory_order_relaxed);
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i] == fd) {
      fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  close(fd);
}

BulkClient::~BulkClient() {
  absl::MutexLock lock(&mu_);
  for (auto& [peer, fds] : idle_)
    for (int fd : fds) close(fd);
}

size_t BulkClient::NumPooledForTest() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (auto& [peer, fds] : idle_) n += fds.size();
  return n;
}

absl::StatusOr<int> BulkClient::Connect(const std::string& host, int port) {
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
  return fd;
}

absl::Status BulkClient::Fetch(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                               CancellationManager* cm, absl::Duration idle_timeout) {
  bool stale = false;
  absl::Status s = FetchOnce(host, port, ticket, dst, n, cm, idle_timeout, /*pooled_ok=*/true, &stale);
  // A pooled connection the peer has closed (it restarted, or idled out)
  // fails before any byte of the answer: try once more on a new one.
  if (stale) s = FetchOnce(host, port, ticket, dst, n, cm, idle_timeout, /*pooled_ok=*/false, &stale);
  return s;
}

absl::Status BulkClient::FetchOnce(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                                   CancellationManager* cm, absl::Duration idle_timeout, bool pooled_ok,
                                   bool* stale) {
  *stale = false;
  const std::string peer = PeerName(host, port);
  auto fail = [&](absl::StatusCode code, const std::string& what) {
    return absl::Status(code, absl::StrCat("Bulk transfer of ", n, " bytes from ", peer, ": ", what,
                                           ". If a firewall blocks it, give the servers a --bulk_port it allows, "
                                           "or set DISTFLOW_BULK_TRANSFER=0 on every task."));
  };
  bool pooled = false;
  absl::StatusOr<int> acquired = Acquire(peer, host, port, pooled_ok, &pooled);
  if (!acquired.ok()) return fail(absl::StatusCode::kUnavailable, std::string(acquired.status().message()));
  const int fd = *acquired;
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
      close(fd);
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
  if (int w = WriteAll(fd, req, sizeof(req)); w != 0) {
    *stale = pooled;
    status = fail(absl::StatusCode::kUnavailable, absl::StrCat("sending the request: ", std::strerror(w)));
  } else if (size_t got_head = ReadAll(fd, head, sizeof(head), &err); got_head != sizeof(head)) {
    *stale = pooled && got_head == 0 && err != EAGAIN && err != EWOULDBLOCK;
    status = fail(err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded
                                                      : absl::StatusCode::kUnavailable,
                  err ? std::strerror(err) : "the peer closed the connection");
  } else if (uint64_t len = GetU64(head); len == kUnknownTicket) {
    status = fail(absl::StatusCode::kNotFound, "the peer no longer holds the tensor (ticket unknown or expired)");
  } else if (len != n) {
    status = fail(absl::StatusCode::kDataLoss, absl::StrCat("the peer offers ", len, " bytes"));
  } else if (size_t got = ReadAll(fd, static_cast<char*>(dst), n, &err); got != n) {
    status = fail(err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded
                                                      : absl::StatusCode::kDataLoss,
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
    close(fd);
    return absl::CancelledError(absl::StrCat("Bulk transfer from ", peer, " cancelled"));
  }
  if (!status.ok()) {
    close(fd);
    return status;
  }
  Release(peer, fd);
  return absl::OkStatus();
}

absl::StatusOr<int> BulkClient::Acquire(const std::string& peer, const std::string& host, int port, bool pooled_ok,
                                        bool* pooled) {
  *pooled = false;
  if (pooled_ok) {
    absl::MutexLock lock(&mu_);
    auto it = idle_.find(peer);
    if (it != idle_.end() && !it->second.empty()) {
      int fd = it->second.back();
      it->second.pop_back();
      *pooled = true;
      return fd;
    }
  }
  return Connect(host, port);
}

void BulkClient::Release(const std::string& peer, int fd) {
  {
    absl::MutexLock lock(&mu_);
    std::vector<int>& idle = idle_[peer];
    if (idle.size() < kMaxIdlePerPeer) {
      idle.push_back(fd);
      return;
    }
  }
  close(fd);
}

absl::StatusOr<uint64_t> BulkClient::Put(const std::string& host, int port, const void* src, size_t n,
                                         absl::Duration idle_timeout) {
  const std::string peer = PeerName(host, port);
  auto fail = [&](absl::StatusCode code, const std::string& what) {
    return absl::Status(code, absl::StrCat("Bulk transfer of ", n, " bytes to ", peer, ": ", what,
                                           ". If a firewall blocks it, give the servers a --bulk_port it allows, "
                                           "or set DISTFLOW_BULK_TRANSFER=0."));
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool pooled = false;
    absl::StatusOr<int> acquired = Acquire(peer, host, port, /*pooled_ok=*/attempt == 0, &pooled);
    if (!acquired.ok()) return fail(absl::StatusCode::kUnavailable, std::string(acquired.status().message()));
    const int fd = *acquired;
    SetIdleTimeout(fd, idle_timeout);
    char req[16];
    PutU32(req, kPutMagic);
    PutU32(req + 4, kVersion);
    PutU64(req + 8, n);
    char head[8];
    int err = 0;
    int w = WriteAll(fd, req, sizeof(req));
    if (w == 0 && n > 0) w = WriteAll(fd, static_cast<const char*>(src), n);
    size_t got = w == 0 ? ReadAll(fd, head, sizeof(head), &err) : 0;
    if (w == 0 && got == sizeof(head)) {
      uint64_t ticket = GetU64(head);
      if (ticket == kUnknownTicket) {
        close(fd);
        return fail(absl::StatusCode::kResourceExhausted, "the peer could not allocate the buffer");
      }
      Release(peer, fd);
      return ticket;
    }
    close(fd);
    // A stale pooled connection (the peer restarted) fails at once: one retry on a new one.
    if (pooled && got == 0 && err != EAGAIN && err != EWOULDBLOCK) continue;
    if (w != 0) return fail(absl::StatusCode::kUnavailable, absl::StrCat("sending: ", std::strerror(w)));
    return fail(err == EAGAIN || err == EWOULDBLOCK ? absl::StatusCode::kDeadlineExceeded
                                                    : absl::StatusCode::kUnavailable,
                err ? std::strerror(err) : "the peer closed the connection");
  }
  return fail(absl::StatusCode::kUnavailable, "the connection failed twice");
}

}  // namespace distflow
