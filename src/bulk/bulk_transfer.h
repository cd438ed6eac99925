// Bulk tensor transfer: large tensors cross between tasks on a TCP
// connection of their own (TLS over it when the process uses TLS, see
// bulk_tls.h) and are read straight into the receiving tensor's buffer, while
// gRPC carries only the RecvTensor request and a small header.
//
// Why: gRPC copies every received byte into its own slices and frames it in
// HTTP/2; on loopback that costs ~40% of the bandwidth a plain socket reaches
// (docs/PERFORMANCE.md). Here the sender writes from the tensor's memory and
// the receiver reads into the destination tensor: one copy each way, in the
// kernel, like iperf3.
//
// Flow: a RecvTensor answer for a tensor of at least kBulkMinBytes carries a
// ticket and the sender's bulk port instead of the bytes (only if the request
// said it accepts bulk). The receiver connects to that port on the sending
// task's host (connections are pooled), sends the ticket and reads exactly the
// tensor's byte count. Offers not fetched within a TTL are dropped. RunGraph
// and RunStep feeds and fetches use the same tickets (NamedTensor.bulk_ticket).
//
// The other direction (a client's large feeds to its master) puts bytes:
// the client sends them to the master's bulk port and gets a ticket, which
// the RunStep request names instead of carrying the bytes.
//
// Wire format on the bulk connection, all little-endian:
//   get:  request  = u32 magic "DFBK", u32 version (1), u64 ticket
//         response = u64 length (UINT64_MAX: unknown or expired ticket), bytes
//   put:  request  = u32 magic "DFBP", u32 version (1), u64 length, bytes
//         response = u64 ticket (UINT64_MAX: refused, e.g. out of memory)
//
//   identify: request = u32 magic "DFBI", u32 version (1), u64 0
//             response = u32 length, "<boot id>/<hostname>\n<socket name>"
//   direct get (shared-memory connections only):
//             request  = u32 magic "DFBD", u32 version (1), u64 ticket
//             response = u64 length (UINT64_MAX: unknown ticket), u64 the
//                        tensor's address in the server's memory; then the
//                        client sends one byte: 0 = it read the bytes itself
//                        (done), 1 = it could not: the server sends them
//                        through the ring as for a get
//   mapped get (shared-memory connections only; shm_blocks.h):
//             request  = u32 magic "DFBM", u32 version (1), u64 ticket
//             response = u64 length (UINT64_MAX: unknown ticket, nothing
//                        follows), u32 mode (0 ring, 1 block), u32 drop
//                        count d, u64 block id, u64 offset, u64 block bytes,
//                        d x u64 ids of blocks the client is to unmap; with
//                        SCM_RIGHTS the block's memfd the first time the
//                        connection names it. Mode 0: the bytes follow
//                        through the ring. Mode 1: the client copies them
//                        from the block and sends one byte as after a
//                        direct get (0 done, 1 it could not map the block:
//                        the ring then)
//
// Same host: a client whose identify answer shows the peer on its own
// machine (same boot id and hostname) and names a socket moves the bytes
// through shared memory instead of TCP (shm_channel.h): the same get and put
// requests, on an abstract Unix-domain socket whose hello carries the cluster
// token and is answered with a memfd ring segment (SCM_RIGHTS); the bytes go
// through the ring, the socket carries one byte per chunk. With
// DISTFLOW_SHM_DIRECT=1 a get on such a connection instead reads the offered
// tensor straight from the server's memory into the destination with one
// process_vm_readv (one copy instead of the ring's two, and no per-chunk
// signals); the kernel allows it exactly when the client could ptrace the
// server (same user, no Yama restriction), and the client falls back to the
// ring for good when it does not. Off by default: on the VMs measured it
// cost 1.6-1.9x the ring's CPU per byte (the kernel pins the peer's pages
// one by one; docs/PERFORMANCE.md). Otherwise a get on such a connection is
// a mapped get: a server that serves through shared memory allocates its
// large tensors in memfd blocks (tensor/shared_blocks.h), hands a block's
// descriptor over once per connection, and the client copies the tensor
// from its read-only mapping of the block into the destination: one copy,
// no per-chunk signals. A tensor outside a block goes through the ring. Tickets,
// TTLs and budgets are the same. If the socket cannot be reached (another
// network namespace) the client uses TCP. Off with BulkClient's
// `shared_memory` (server: ServerOptions::shared_memory, --shared_memory,
// DISTFLOW_SHM=0). With TLS on, the server offers shared memory only when a
// cluster token is set: the token is then what authenticates a local peer
// (the TLS certificate cannot, no TLS runs on the socket).
//
// Thread-safe. Each accepted connection is served by its own thread (at most
// kMaxConnections, and kMaxConnectionsPerPeer from one address); connections
// are persistent until idle for a minute. When a new connection finds the
// server or its peer's share full, the connection idle longest (of that peer
// first) is closed to make room, so idle connections cannot lock peers out.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/cancellation.h"
#include "base/timer.h"
#include "bulk/bulk_tls.h"
#include "distflow/tensor.h"
#include "proto/master.pb.h"
#include "proto/worker.pb.h"

namespace distflow {
namespace bulk_internal {
class ShmRing;
class MappedBlocks;
}  // namespace bulk_internal

// Tensors smaller than this travel inside the gRPC answer.
inline constexpr size_t kBulkMinBytes = size_t{1} << 20;

// False if the environment variable DISTFLOW_BULK_TRANSFER is "0" (for
// networks where only the cluster spec's ports are open).
bool BulkTransferEnabledByEnv();

// False if the environment variable DISTFLOW_SHM is "0": tasks on one host
// then move bulk bytes over TCP too.
bool SharedMemoryEnabledByEnv();

// True for tensors that travel over a bulk port: numeric (not bool, whose
// bytes must be validated) and at least kBulkMinBytes.
bool IsBulkCandidate(const Tensor& t);
// Fills `out` with `t`'s dtype and shape and the ticket and port of its bytes.
void SetBulkNamedTensor(const std::string& name, const Tensor& t, uint64_t ticket, int port, proto::NamedTensor* out);
class BulkServer;
class Env;
// Drops the puts a RunStep request names (its step will not take them).
void DropBulkFeeds(BulkServer& bulk, const proto::RunStepRequest& req);

// The dtype and shape a bulk NamedTensor announces (DataLoss if malformed).
absl::StatusOr<std::pair<DataType, TensorShape>> BulkTensorSpec(const proto::NamedTensor& nt);

class BulkServer {
 public:
  // Connections served at once (a thread each), in all and from one peer
  // address. A new connection over either limit evicts the connection idle
  // longest (waiting for its hello or its next request); if every one is
  // busy, the new one is closed. Clients keep at most
  // BulkClient::kMaxIdlePerPeer idle connections per peer, reconnect when a
  // pooled one turns out closed, and connections idle for kServerIdleTimeout
  // are closed here.
  static constexpr int kMaxConnections = 1024;
  static constexpr int kMaxConnectionsPerPeer = 256;
  static constexpr absl::Duration kServerIdleTimeout = absl::Seconds(60);
  // How long a new connection has to send its hello.
  static constexpr absl::Duration kHelloTimeout = absl::Seconds(5);

  // Listens on `host` (as in the cluster spec: a name, an IPv4 or an IPv6
  // address without brackets), on `port` (0: one the system picks). With an
  // `auth_token`, a connection whose hello does not carry it is refused
  // before anything else is read (rpc/auth.h). With `tls` (which
  // must have a certificate), every connection starts with a TLS handshake
  // and one that fails it is closed (bulk_tls.h). Offers expire on `timer`
  // (null: Timer::Global(); tests pass one on a fake clock), which must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<BulkServer>> Start(const std::string& host,
                                                           absl::Duration offer_ttl = absl::Seconds(120), int port = 0,
                                                           std::string auth_token = "",
                                                           std::shared_ptr<const BulkTls> tls = nullptr,
                                                           Timer* timer = nullptr);
  ~BulkServer();  // closes the listener and every connection, joins their threads
  BulkServer(const BulkServer&) = delete;
  BulkServer& operator=(const BulkServer&) = delete;

  int port() const { return port_; }
  // Keeps `t` until one peer fetches it or the TTL passes; returns the ticket,
  // or 0 if the offers held would exceed max_held_offer_bytes() (peers that
  // never fetch, e.g. because they died): send `t` inside the message then.
  uint64_t Offer(const Tensor& t);
  uint64_t max_held_offer_bytes() const { return max_held_offer_bytes_.load(std::memory_order_relaxed); }
  // Half the machine's memory unless set (tests, small machines).
  void set_max_held_offer_bytes(uint64_t n) { max_held_offer_bytes_.store(n, std::memory_order_relaxed); }
  size_t NumOffersForTest() const;
  // Takes an offer in this process (an in-process client's fetch): the
  // tensor itself, no copy. NotFound if the ticket is unknown or expired.
  absl::StatusOr<Tensor> TakeOffer(uint64_t ticket);
  // A put from this process (an in-process client's feed): keeps `t`'s
  // buffer, no copy, under the same ticket rules as a put from a peer.
  uint64_t PutLocal(const Tensor& t);
  // Takes bytes a peer put, as a tensor of `dtype` and `shape` (their sizes
  // must match). NotFound if the ticket is unknown or expired.
  absl::StatusOr<Tensor> TakeReceived(uint64_t ticket, DataType dtype, const TensorShape& shape);
  // Frees the bytes of a put nobody will take (its step failed first).
  void DropReceived(uint64_t ticket);
  // Puts are refused while the bytes held for puts would exceed this (half
  // the machine's memory); unclaimed puts are dropped after min(TTL, 30 s).
  uint64_t max_held_put_bytes() const { return max_held_put_bytes_.load(std::memory_order_relaxed); }
  void set_max_held_put_bytes(uint64_t n) { max_held_put_bytes_.store(n, std::memory_order_relaxed); }
  size_t NumReceivedForTest() const;
  size_t NumConnectionThreadsForTest() const {
    absl::MutexLock lock(&mu_);
    return conns_.size();
  }
  // Connections open now, and idle ones closed to make room so far.
  size_t NumOpenConnectionsForTest() const {
    absl::MutexLock lock(&mu_);
    return open_.size();
  }
  size_t NumBusyConnectionsForTest() const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [fd, c] : open_) n += c.busy && !c.evicted ? 1 : 0;
    return n;
  }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  // Tensor bytes sent to peers, and received from them, so far.
  uint64_t bytes_served() const { return bytes_served_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }

  // Serves same-host peers through shared memory too, on an abstract
  // Unix-domain socket that the identify answer names. FailedPrecondition
  // with TLS on and no cluster token (nothing would authenticate a local
  // peer); Unavailable if the socket cannot be made. Idempotent.
  absl::Status EnableSharedMemory();
  bool shared_memory_enabled() const {
    absl::MutexLock lock(&mu_);
    return !shm_name_.empty();
  }
  // The abstract socket same-host peers connect to ("" while shared memory is off).
  std::string shm_socket_name() const {
    absl::MutexLock lock(&mu_);
    return shm_name_;
  }
  // Of bytes_served() and bytes_received(): those that went through shared memory.
  uint64_t shm_bytes_served() const { return shm_bytes_served_.load(std::memory_order_relaxed); }
  uint64_t shm_bytes_received() const { return shm_bytes_received_.load(std::memory_order_relaxed); }
  size_t NumShmConnectionsForTest() const {
    absl::MutexLock lock(&mu_);
    return shm_open_.size();
  }
  // Runs `hook` after every chunk a shared-memory get announces (tests stop
  // a transfer midway with it). Set before serving.
  void set_shm_chunk_hook_for_test(void (*hook)()) { shm_chunk_hook_ = hook; }
  // Connections served through shared memory at once (a ring segment each).
  static constexpr int kMaxShmConnections = 256;

 private:
  struct Offers;
  void ShmAcceptLoop(int listen_fd, int stop_fd);
  void ServeShm(int fd);
  void StopSharedMemory();
  BulkServer(int listen_fd, int port, absl::Duration ttl, std::string auth_token, std::shared_ptr<const BulkTls> tls,
             Timer* timer);
  // Runs the TLS handshake (with TLS on) and reads the connection's hello;
  // false (and the connection is to close) unless both pass.
  bool Handshake(BulkConn& conn);
  void AcceptLoop();
  // Makes room for a connection from `peer`: false if the server or the
  // peer is at its limit with no idle connection to close.
  bool MakeRoom(const std::string& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks connection `fd` busy (a request has arrived) or idle again; false if
  // it was evicted meanwhile (the request is then not served).
  bool SetBusy(int fd, bool busy);
  void Serve(int fd);

  const int listen_fd_;
  const int port_;
  const absl::Duration ttl_;
  const std::string auth_token_;
  const std::shared_ptr<const BulkTls> tls_;  // null: plain TCP
  std::atomic<uint64_t> max_held_put_bytes_;
  std::atomic<uint64_t> max_held_offer_bytes_;
  std::shared_ptr<Offers> offers_;
  std::thread acceptor_;
  std::atomic<uint64_t> bytes_served_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> evictions_{0};
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  struct Open {
    std::string peer;       // the remote address, without the port
    absl::Time idle_since;  // meaningful while !busy
    bool busy = false;      // serving a request
    bool evicted = false;   // shut down to make room; its thread is ending
  };
  absl::flat_hash_map<int, Open> open_ ABSL_GUARDED_BY(mu_);             // fd -> state
  absl::flat_hash_map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);  // not evicted, by peer
  absl::Time last_refusal_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // One per accepted connection; finished ones are joined on the next accept.
  struct Conn {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Conn> conns_ ABSL_GUARDED_BY(mu_);
  // Shared memory (bulk_shm_server.cc): the listener, a pipe that stops its
  // accept loop, and the connections, like the TCP ones.
  std::string shm_name_ ABSL_GUARDED_BY(mu_);
  int shm_listen_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int shm_stop_fd_ ABSL_GUARDED_BY(mu_) = -1;  // the pipe's write end
  std::thread shm_acceptor_;
  absl::flat_hash_map<int, bool> shm_open_ ABSL_GUARDED_BY(mu_);  // fd -> serving
  std::vector<Conn> shm_conns_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> shm_bytes_served_{0};
  std::atomic<uint64_t> shm_bytes_received_{0};
  void (*shm_chunk_hook_)() = nullptr;
};

class BulkClient {
 public:
  static constexpr size_t kMaxIdlePerPeer = 4;
  // Pooled connections idle longer than this are closed (the server closes
  // its end after kServerIdleTimeout; a peer that restarted on another port
  // would otherwise leave its old connections here for good).
  static constexpr absl::Duration kClientIdleTimeout = absl::Seconds(50);
  // The longest a new connection waits for the peer's answer to its hello
  // (less if the transfer's idle_timeout is shorter). A peer that accepts the
  // connection and never answers (not a bulk port, or a stopped process)
  // fails the transfer with DeadlineExceeded then.
  static constexpr absl::Duration kHelloTimeout = absl::Seconds(20);
  // Every new connection opens with a hello carrying `auth_token` (may be
  // empty), after a TLS handshake when `tls` is given. How long a pooled
  // connection has been idle is read from `clock` (null: the real clock; it
  // must outlive the client).
  explicit BulkClient(absl::Duration idle_close = kClientIdleTimeout, std::string auth_token = "",
                      std::shared_ptr<const BulkTls> tls = nullptr, Env* clock = nullptr);
  ~BulkClient();  // closes pooled connections
  BulkClient(const BulkClient&) = delete;
  BulkClient& operator=(const BulkClient&) = delete;

  // Fetches ticket `ticket` from host:port into `dst`, which must hold exactly
  // `n` bytes. Blocks; `cm` (may be null) cancels it by shutting the socket.
  // Errors name the peer: Unavailable (cannot connect), NotFound (ticket
  // unknown or expired), DataLoss (wrong length, connection closed early),
  // DeadlineExceeded (no data for `idle_timeout`, or no answer to the
  // hello of a new connection, see kHelloTimeout), Cancelled.
  absl::Status Fetch(const std::string& host, int port, uint64_t ticket, void* dst, size_t n, CancellationManager* cm,
                     absl::Duration idle_timeout = absl::Seconds(60));
  // Sends `n` bytes from `src` to host:port; returns the ticket that names
  // them there. Errors as for Fetch.
  absl::StatusOr<uint64_t> Put(const std::string& host, int port, const void* src, size_t n,
                               absl::Duration idle_timeout = absl::Seconds(60));
  size_t NumPooledForTest() const;

  // Moves the bytes through shared memory when the peer is on this host and
  // offers it (see the top of this file); otherwise, or off, over TCP. Call
  // before any transfer.
  void set_shared_memory(bool on) { shared_memory_ = on; }
  size_t NumPooledShmForTest() const;
  // Same-host gets read the peer's tensor directly (see the top of this
  // file); off unless DISTFLOW_SHM_DIRECT is "1". Call before any transfer.
  void set_shm_direct_read(bool on) { shm_direct_.store(on, std::memory_order_relaxed); }
  bool shm_direct_read() const { return shm_direct_.load(std::memory_order_relaxed); }
  // Same-host gets copy a tensor that lies in one of the server's shared
  // blocks straight out of it (mapped gets, see the top of this file); on
  // unless set off (tests of the ring). Call before any transfer.
  void set_shm_mapped_reads(bool on) { shm_mapped_ = on; }
  // Makes the next direct reads fail as a forbidden process_vm_readv does
  // (tests of the fallback to the ring).
  void set_shm_direct_denied_for_test(bool denied) { shm_direct_denied_for_test_ = denied; }

 private:
  struct ShmConn {
    int fd = -1;
    std::shared_ptr<bulk_internal::ShmRing> ring;
    int peer_pid = 0;  // the server's process (SO_PEERCRED); 0: unknown, no direct reads
    std::shared_ptr<bulk_internal::MappedBlocks> blocks;  // the server's blocks mapped here
  };
  // The peer's shared-memory socket ("" : use TCP), found by an identify
  // request on its TCP port and kept for a minute. DeadlineExceeded if the
  // peer accepts connections and does not answer their hello (TCP would only
  // wait for it again).
  absl::StatusOr<std::string> ShmSocketFor(const std::string& peer, const std::string& host, int port,
                                           absl::Duration idle_timeout);
  absl::StatusOr<ShmConn> ShmConnect(const std::string& peer, const std::string& socket);
  absl::StatusOr<ShmConn> AcquireShm(const std::string& peer, const std::string& socket, bool pooled_ok, bool* pooled);
  void ReleaseShm(const std::string& peer, ShmConn conn);
  // The peer's socket could not be used (`why`): TCP for now.
  void NoShmRoute(const std::string& peer, const absl::Status& why);
  // nullopt: the peer cannot be reached through shared memory; use TCP.
  std::optional<absl::Status> FetchShm(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                                       CancellationManager* cm, absl::Duration idle_timeout);
  std::optional<absl::StatusOr<uint64_t>> PutShm(const std::string& host, int port, const void* src, size_t n,
                                                 absl::Duration idle_timeout);

  // A connection to host:port, from the pool or new; `pooled` says which.
  // A new one waits for the hello's answer at most min(idle_timeout,
  // kHelloTimeout).
  absl::StatusOr<BulkConn> Acquire(const std::string& peer, const std::string& host, int port, bool pooled_ok,
                                   bool* pooled, absl::Duration idle_timeout);
  void Release(const std::string& peer, BulkConn conn);
  absl::StatusOr<BulkConn> Connect(const std::string& host, int port, absl::Duration hello_timeout);
  absl::Status FetchOnce(const std::string& host, int port, uint64_t ticket, void* dst, size_t n,
                         CancellationManager* cm, absl::Duration idle_timeout, bool pooled_ok, bool* stale);

  // Closes pooled connections idle for longer than idle_close_.
  void CloseExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Idle {
    BulkConn conn;
    absl::Time since;
  };
  absl::Time Now() const;

  const absl::Duration idle_close_;
  const std::string auth_token_;
  const std::shared_ptr<const BulkTls> tls_;  // null: plain TCP
  Env* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Idle>> idle_ ABSL_GUARDED_BY(mu_);  // "host:port" -> connections
  bool shared_memory_ = false;
  std::atomic<bool> shm_direct_{true};
  bool shm_direct_denied_for_test_ = false;
  bool shm_mapped_ = true;
  struct ShmRoute {
    std::string socket;  // "": TCP
    absl::Time until;
  };
  absl::flat_hash_map<std::string, ShmRoute> shm_routes_ ABSL_GUARDED_BY(mu_);  // "host:port" ->
  struct ShmIdle {
    ShmConn conn;
    absl::Time since;
  };
  absl::flat_hash_map<std::string, std::vector<ShmIdle>> shm_idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
