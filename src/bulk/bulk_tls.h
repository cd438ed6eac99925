// TLS for the bulk-transfer port (see bulk_transfer.h), and the byte stream
// both sides of a bulk connection read and write: plain TCP, or TLS over it.
//
// With TLS on for the process (distflow/auth.h: --tls_cert/--tls_key/--tls_ca
// or DISTFLOW_TLS_*), a bulk connection starts with a TLS handshake under the
// same rules as the gRPC connections: the server presents its certificate,
// the client checks it against the CA (the system's roots without one) and
// the host it dialled, and with a CA the server demands a client certificate
// signed by it. The cluster-token hello then travels inside TLS. Nothing else
// changes: the tensor's bytes are encrypted straight from and into the
// tensors' memory, with no copy of ours.
//
// Internal to bulk/. BulkTls is immutable after Create and
// thread-safe; a BulkConn is used by one thread at a time (another may
// shutdown() its descriptor to wake it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct ssl_st;
struct ssl_ctx_st;

namespace distflow {

// One bulk connection: a socket, and its TLS session when TLS is on.
struct BulkConn {
  int fd = -1;
  ssl_st* ssl = nullptr;
};
// Frees the TLS session (without a close_notify: the peer may be gone) and
// closes the socket.
void CloseBulkConn(BulkConn c);
// 0 when all `n` bytes were sent, else an errno (EPIPE for a closed peer,
// EAGAIN for a send timeout, EPROTO for a TLS error).
int BulkWriteAll(const BulkConn& c, const char* p, size_t n);
// The bytes read before the end of the stream or an error; *err is 0 for
// the end, else an errno as for BulkWriteAll (EAGAIN: the receive timeout).
size_t BulkReadAll(const BulkConn& c, char* p, size_t n, int* err);
// The reason of this thread's last EPROTO from BulkWriteAll or BulkReadAll.
std::string LastBulkTlsError();

class BulkTls {
 public:
  // Contexts from PEM contents (auth.h's TlsFiles, read): `cert` and `key`
  // may be empty for a client-only process; `ca` empty means the system's
  // roots verify servers and servers do not ask for client certificates.
  // InvalidArgument naming the part that OpenSSL cannot read.
  static absl::StatusOr<std::shared_ptr<const BulkTls>> Create(const std::string& cert, const std::string& key,
                                                               const std::string& ca);
  // The process's TLS setting: null when TLS is off.
  static absl::StatusOr<std::shared_ptr<const BulkTls>> ForProcess();
  ~BulkTls();
  BulkTls(const BulkTls&) = delete;
  BulkTls& operator=(const BulkTls&) = delete;

  // The server's side of the handshake on an accepted socket (its receive
  // timeout bounds it). Unauthenticated saying why when the peer is not a
  // TLS client or has no acceptable certificate.
  absl::StatusOr<ssl_st*> Accept(int fd) const;
  // The client's side on a connected socket to `host` (as dialled: a name
  // or an IP address, which the server's certificate must carry).
  absl::StatusOr<ssl_st*> Connect(int fd, const std::string& host) const;
  bool can_serve() const { return server_ != nullptr; }

 private:
  BulkTls() = default;
  ssl_ctx_st* server_ = nullptr;  // null without a certificate
  ssl_ctx_st* client_ = nullptr;
};

}  // namespace distflow
