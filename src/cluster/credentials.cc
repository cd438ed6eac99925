#include "cluster/credentials.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"

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
    return absl::InvalidArgumentError(
        absl::StrCat(source, "=", path, ": cannot read the ", what, " file (", std::strerror(errno), ")"));
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
        s->cert.empty()
            ? absl::StrCat(key_source, " is given without a certificate: set --tls_cert (or ", kTlsCertEnv, ") too")
            : absl::StrCat(cert_source, " is given without its private key: set --tls_key (or ", kTlsKeyEnv, ") too"));
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

bool ProcessTlsPem(std::string* cert, std::string* key, std::string* ca) {
  TlsState& s = LoadedTls();
  absl::MutexLock lock(&s.mu);
  if (!s.on) return false;
  *cert = s.cert;
  *key = s.key;
  *ca = s.ca;
  return true;
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
    return absl::InvalidArgumentError(
        absl::StrCat("the token file '", path, "' is empty; put the cluster's secret in it"));
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
          absl::StrCat(source,
                       " holds a byte that is not printable ASCII; use letters, digits and punctuation "
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

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.") ||
         absl::EndsWith(host, ".localhost");
}

}  // namespace distflow
