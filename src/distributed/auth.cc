#include "distributed/auth.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace distflow {
namespace {

struct TokenState {
  absl::Mutex mu;
  bool set = false;
  std::string token;
};

TokenState& State() {
  static TokenState* s = new TokenState();
  return *s;
}

class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthTokenMetadataKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;  // owned by the factory, which the channel keeps
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&token_);
  }

 private:
  const std::string token_;
};

struct TlsState {
  absl::Mutex mu;
  bool loaded = false;  // SetUpTls ran, or the variables were read
  bool on = false;
  std::string cert, key, ca;  // PEM contents
};

TlsState& Tls() {
  static TlsState* s = new TlsState();
  return *s;
}

// Reads one PEM file named by `source` (a flag or a variable).
absl::Status ReadPem(const std::string& path, const std::string& source, const char* what, std::string* out) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(source, "=", path, ": cannot read the ", what, " file (",
                                                   std::strerror(errno), ")"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  if (!absl::StrContains(*out, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, "=", path, ": not a PEM file (no '-----BEGIN' line); give the ", what, " in PEM form"));
  }
  return absl::OkStatus();
}

// Fills `s` from the flags, each missing one from its variable.
absl::Status LoadTls(const TlsFiles& flags, TlsState* s) {
  struct Part {
    std::string flag_value;
    const char* flag;
    const char* env;
    const char* what;
    std::string* out;
  };
  std::string cert_source, key_source;
  bool any = false;
  for (Part p : {Part{flags.cert, "--tls_cert", kTlsCertEnv, "certificate", &s->cert},
                 Part{flags.key, "--tls_key", kTlsKeyEnv, "private key", &s->key},
                 Part{flags.ca, "--tls_ca", kTlsCaEnv, "CA certificate", &s->ca}}) {
    std::string path = p.flag_value, source = p.flag;
    if (path.empty()) {
      const char* e = std::getenv(p.env);
      if (e != nullptr) path = e;
      source = p.env;
    }
    if (p.out == &s->cert && !path.empty()) cert_source = source;
    if (p.out == &s->key && !path.empty()) key_source = source;
    any |= !path.empty();
    if (absl::Status st = ReadPem(path, source, p.what, p.out); !st.ok()) return st;
  }
  if (s->cert.empty() != s->key.empty()) {
    return absl::InvalidArgumentError(
        s->cert.empty() ? absl::StrCat(key_source, " is given without a certificate: set --tls_cert (or ", kTlsCertEnv,
                                       ") too")
                        : absl::StrCat(cert_source, " is given without its private key: set --tls_key (or ",
                                       kTlsKeyEnv, ") too"));
  }
  s->on = any;
  return absl::OkStatus();
}

// The process's TLS state, read from the variables on first use.
TlsState& LoadedTls() {
  TlsState& s = Tls();
  absl::MutexLock lock(&s.mu);
  if (!s.loaded) {
    s.loaded = true;
    absl::Status st = LoadTls(TlsFiles{}, &s);
    if (!st.ok()) {
      // Fail closed: TLS stays on with what could be read, so connections fail
      // instead of going out in the clear.
      LOG(ERROR) << "TLS: " << st.message();
      s.on = true;
    }
  }
  return s;
}

}  // namespace

absl::Status SetUpTls(const TlsFiles& flags) {
  TlsState& s = Tls();
  absl::MutexLock lock(&s.mu);
  s.loaded = true;
  s.cert.clear();
  s.key.clear();
  s.ca.clear();
  absl::Status st = LoadTls(flags, &s);
  if (!st.ok()) s.on = true;  // fail closed if the caller goes on anyway
  return st;
}

bool TlsEnabled() {
  TlsState& s = LoadedTls();
  absl::MutexLock lock(&s.mu);
  return s.on;
}

absl::Status CheckTlsCanServe() { return ServerCredentials().status(); }

bool ProcessTlsPem(std::string* cert, std::string* key, std::string* ca) {
  TlsState& s = LoadedTls();
  absl::MutexLock lock(&s.mu);
  if (!s.on) return false;
  *cert = s.cert;
  *key = s.key;
  *ca = s.ca;
  return true;
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials() {
  TlsState& s = LoadedTls();
  absl::MutexLock lock(&s.mu);
  if (!s.on) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = s.ca;  // empty: the system's roots
  o.pem_private_key = s.key;
  o.pem_cert_chain = s.cert;
  return grpc::SslCredentials(o);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials() {
  TlsState& s = LoadedTls();
  absl::MutexLock lock(&s.mu);
  if (!s.on) return grpc::InsecureServerCredentials();
  if (s.cert.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("TLS is on but this task has no certificate to serve with: set "
                                                   "--tls_cert and --tls_key (or ",
                                                   kTlsCertEnv, " and ", kTlsKeyEnv, ")"));
  }
  grpc::SslServerCredentialsOptions o(s.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                   : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = s.ca;
  o.pem_key_cert_pairs.push_back({s.key, s.cert});
  return grpc::SslServerCredentials(o);
}

std::string ClusterToken() {
  TokenState& s = State();
  absl::MutexLock lock(&s.mu);
  if (!s.set) {
    const char* env = std::getenv(kAuthTokenEnv);
    s.token = env != nullptr ? std::string(absl::StripAsciiWhitespace(env)) : "";
    s.set = true;
  }
  return s.token;
}

void SetClusterToken(std::string token) {
  TokenState& s = State();
  absl::MutexLock lock(&s.mu);
  s.token = std::move(token);
  s.set = true;
}

absl::Status LoadClusterTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the token file '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the token file '", path, "' is empty; put the cluster's secret in it"));
  }
  if (absl::Status s = ValidateToken(token, absl::StrCat("the token in '", path, "'")); !s.ok()) return s;
  SetClusterToken(std::move(token));
  return absl::OkStatus();
}

absl::Status ValidateToken(const std::string& token, const std::string& source) {
  if (token.size() > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(source, " has ", token.size(), " bytes; at most 4096"));
  }
  for (char c : token) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, " holds a byte that is not printable ASCII; use letters, digits and punctuation "
                               "(e.g. the output of: openssl rand -hex 32)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SetUpClusterToken(const std::string& token_file) {
  if (!token_file.empty()) return LoadClusterTokenFile(token_file);
  const std::string token = ClusterToken();
  if (token.empty()) return absl::OkStatus();
  return ValidateToken(token, kAuthTokenEnv);
}

std::shared_ptr<grpc::Channel> NewAuthenticatedChannel(const std::string& address, const grpc::ChannelArguments& args,
                                                       const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(address, ClientCredentials(), args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, ClientCredentials(), args,
                                                                 std::move(interceptors));
}

bool TokensEqual(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  for (size_t i = 0; i < longer.size(); ++i) {
    const unsigned char x = i < shorter.size() ? static_cast<unsigned char>(shorter[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ static_cast<unsigned char>(longer[i]));
  }
  return diff == 0;
}

grpc::Status CheckCallToken(const grpc::ServerContextBase& ctx, const std::string& expected,
                            const std::string& server) {
  if (expected.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kAuthTokenMetadataKey);
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(server, " requires the cluster's token and this call carries none: set ",
                                     kAuthTokenEnv, " (or --auth_token_file) to the cluster's token"));
  }
  if (!TokensEqual(std::string(it->second.data(), it->second.size()), expected)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(server, " refused this call: its token is not the cluster's (check ",
                                     kAuthTokenEnv, " or --auth_token_file)"));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* RefuseUnauthenticated(grpc::CallbackServerContext* ctx, const std::string& expected,
                                                const std::string& server) {
  grpc::Status s = CheckCallToken(*ctx, expected, server);
  if (s.ok()) return nullptr;
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(s);
  return r;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.") ||
         absl::EndsWith(host, ".localhost");
}

}  // namespace distflow
