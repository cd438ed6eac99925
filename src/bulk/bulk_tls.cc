#include "bulk/bulk_tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cluster/credentials.h"

namespace distflow {
namespace {

// The reason of the last OpenSSL error on this thread (and the queue emptied).
std::string SslError() {
  unsigned long e = ERR_get_error();
  std::string out = e == 0 ? "unknown TLS error" : ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "";
  if (out.empty()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = buf;
  }
  ERR_clear_error();
  return out;
}

// A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own writes with
// write(), and a peer that has gone would raise SIGPIPE in the process.
int SockWrite(BIO* b, const char* p, int n) {
  ssize_t w;
  do {
    w = send(static_cast<int>(BIO_get_fd(b, nullptr)), p, static_cast<size_t>(n), MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  BIO_clear_retry_flags(b);
  if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return static_cast<int>(w);
}

int SockRead(BIO* b, char* p, int n) {
  ssize_t r;
  do {
    r = recv(static_cast<int>(BIO_get_fd(b, nullptr)), p, static_cast<size_t>(n), 0);
  } while (r < 0 && errno == EINTR);
  BIO_clear_retry_flags(b);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return static_cast<int>(r);
}

const BIO_METHOD* NoSignalSocketMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "distflow bulk socket");
    const BIO_METHOD* base = BIO_s_socket();
    BIO_meth_set_write(m, SockWrite);
    BIO_meth_set_read(m, SockRead);
    BIO_meth_set_puts(m, BIO_meth_get_puts(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));  // fd get/set, flush, eof
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    return m;
  }();
  return method;
}

// Loads PEM contents into `ctx`: the chain and key as its identity, the CA
// as what it trusts. `side` names the context in errors.
absl::Status Load(SSL_CTX* ctx, const std::string& cert, const std::string& key, const std::string& ca) {
  auto bio = [](const std::string& pem) { return BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())); };
  if (!cert.empty()) {
    BIO* b = bio(cert);
    X509* leaf = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (ok) {  // the rest of the chain
      X509* extra = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
      if (extra == nullptr) break;
      if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
        X509_free(extra);
        ok = false;
      }
    }
    BIO_free(b);
    ERR_clear_error();  // the end of the chain reads as an error
    if (!ok) return absl::InvalidArgumentError("the TLS certificate cannot be read by OpenSSL: " + SslError());
  }
  if (!key.empty()) {
    BIO* b = bio(key);
    EVP_PKEY* k = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    if (k == nullptr) return absl::InvalidArgumentError("the TLS private key cannot be read by OpenSSL: " + SslError());
    const bool ok = SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(k);
    if (!ok) return absl::InvalidArgumentError("the TLS private key does not belong to the certificate: " + SslError());
  }
  if (ca.empty()) {
    SSL_CTX_set_default_verify_paths(ctx);
  } else {
    BIO* b = bio(ca);
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int added = 0;
    while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) {
      if (X509_STORE_add_cert(store, c) == 1) ++added;
      X509_free(c);
    }
    BIO_free(b);
    ERR_clear_error();
    if (added == 0) return absl::InvalidArgumentError("the TLS CA file holds no certificate OpenSSL can read");
  }
  return absl::OkStatus();
}

thread_local std::string last_tls_error;

// An errno for the outcome `rc` of an SSL call on `ssl`; a TLS error's
// reason is kept for LastBulkTlsError.
int ErrnoOf(SSL* ssl, int rc, int saved_errno) {
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_ZERO_RETURN:
      return 0;  // the peer's close_notify: the end
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return EAGAIN;  // a socket timeout
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      return saved_errno != 0 ? saved_errno : ECONNRESET;
    default:
      last_tls_error = SslError();
      return EPROTO;
  }
}

}  // namespace

std::string LastBulkTlsError() { return last_tls_error; }

void CloseBulkConn(BulkConn c) {
  if (c.ssl != nullptr) SSL_free(c.ssl);
  if (c.fd >= 0) close(c.fd);
}

int BulkWriteAll(const BulkConn& c, const char* p, size_t n) {
  if (c.ssl == nullptr) {
    while (n > 0) {
      ssize_t w = send(c.fd, p, n, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return w < 0 ? errno : EPIPE;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return 0;
  }
  while (n > 0) {
    const int chunk = static_cast<int>(std::min<size_t>(n, size_t{1} << 30));
    errno = 0;
    const int w = SSL_write(c.ssl, p, chunk);
    if (w <= 0) {
      const int e = ErrnoOf(c.ssl, w, errno);
      return e == 0 ? EPIPE : e;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

size_t BulkReadAll(const BulkConn& c, char* p, size_t n, int* err) {
  size_t done = 0;
  *err = 0;
  while (done < n) {
    if (c.ssl == nullptr) {
      ssize_t r = recv(c.fd, p + done, n - done, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) *err = errno;
      if (r <= 0) return done;
      done += static_cast<size_t>(r);
      continue;
    }
    const int chunk = static_cast<int>(std::min<size_t>(n - done, size_t{1} << 30));
    errno = 0;
    const int r = SSL_read(c.ssl, p + done, chunk);
    if (r <= 0) {
      *err = ErrnoOf(c.ssl, r, errno);
      return done;
    }
    done += static_cast<size_t>(r);
  }
  return done;
}

absl::StatusOr<std::shared_ptr<const BulkTls>> BulkTls::Create(const std::string& cert, const std::string& key,
                                                               const std::string& ca) {
  std::shared_ptr<BulkTls> tls(new BulkTls);
  if (!cert.empty()) {
    tls->server_ = SSL_CTX_new(TLS_server_method());
    if (tls->server_ == nullptr) return absl::InternalError("TLS: cannot create a context: " + SslError());
    SSL_CTX_set_min_proto_version(tls->server_, TLS1_2_VERSION);
    if (absl::Status s = Load(tls->server_, cert, key, ca); !s.ok()) return s;
    // With a CA, clients must show a certificate it signed (mutual TLS).
    SSL_CTX_set_verify(tls->server_, ca.empty() ? SSL_VERIFY_NONE : SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  tls->client_ = SSL_CTX_new(TLS_client_method());
  if (tls->client_ == nullptr) return absl::InternalError("TLS: cannot create a context: " + SslError());
  SSL_CTX_set_min_proto_version(tls->client_, TLS1_2_VERSION);
  if (absl::Status s = Load(tls->client_, cert, key, ca); !s.ok()) return s;
  SSL_CTX_set_verify(tls->client_, SSL_VERIFY_PEER, nullptr);
  return std::shared_ptr<const BulkTls>(std::move(tls));
}

absl::StatusOr<std::shared_ptr<const BulkTls>> BulkTls::ForProcess() {
  std::string cert, key, ca;
  if (!ProcessTlsPem(&cert, &key, &ca)) return std::shared_ptr<const BulkTls>();
  return Create(cert, key, ca);
}

BulkTls::~BulkTls() {
  SSL_CTX_free(server_);
  SSL_CTX_free(client_);
}

namespace {
absl::StatusOr<ssl_st*> Handshake(SSL_CTX* ctx, int fd, const std::string& host, bool server) {
  SSL* ssl = SSL_new(ctx);
  BIO* bio = ssl != nullptr ? BIO_new(NoSignalSocketMethod()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl);
    return absl::InternalError("TLS: cannot create a session: " + SslError());
  }
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, bio, bio);
  if (!server) {
    in6_addr ip{};
    const bool literal = inet_pton(AF_INET, host.c_str(), &ip) == 1 || inet_pton(AF_INET6, host.c_str(), &ip) == 1;
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (literal) {
      X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
      SSL_set_tlsext_host_name(ssl, host.c_str());
    }
  }
  errno = 0;
  const int rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
  if (rc == 1) return ssl;
  const int saved = errno;
  std::string why;
  const long verify = SSL_get_verify_result(ssl);
  const int kind = SSL_get_error(ssl, rc);
  if (!server && verify != X509_V_OK) {
    why = absl::StrCat("the server's certificate is not accepted (", X509_verify_cert_error_string(verify),
                       "): it must be signed by the CA given with --tls_ca and name the host '", host, "'");
    ERR_clear_error();
  } else if (kind == SSL_ERROR_SSL) {
    why = SslError();
  } else if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE) {
    why = "the TLS handshake timed out";
  } else {
    why = saved != 0 ? std::strerror(saved) : "the peer closed the connection during the TLS handshake";
    ERR_clear_error();
  }
  SSL_free(ssl);
  if (server) {
    // Let the client read our alert before the connection goes: a close with
    // its unread hello in our buffer would reset the connection first.
    shutdown(fd, SHUT_WR);
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char sink[4096];
    for (int i = 0; i < 64 && recv(fd, sink, sizeof(sink), 0) > 0; ++i) {
    }
  }
  if (!server && verify == X509_V_OK && absl::StrContains(why, "alert")) {
    why = absl::StrCat("the bulk port refused our certificate (", why,
                       "): a server given --tls_ca accepts only clients whose certificate that CA signed");
  } else if (!server && verify == X509_V_OK) {
    why = absl::StrCat("the TLS handshake failed (", why,
                       "); is the peer running without TLS? Give every task and client the same --tls_cert, "
                       "--tls_key and --tls_ca (or DISTFLOW_TLS_*)");
  }
  return absl::UnauthenticatedError(why);
}
}  // namespace

absl::StatusOr<ssl_st*> BulkTls::Accept(int fd) const {
  if (server_ == nullptr) return absl::FailedPreconditionError("TLS: this process has no certificate to serve with");
  return Handshake(server_, fd, "", /*server=*/true);
}

absl::StatusOr<ssl_st*> BulkTls::Connect(int fd, const std::string& host) const {
  return Handshake(client_, fd, host, /*server=*/false);
}

}  // namespace distflow
