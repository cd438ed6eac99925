// The cluster token: a shared secret that every task and client of a
// cluster is given, and without which a server refuses RPCs (UNAUTHENTICATED)
// and bulk-transfer connections. Servers and sessions of this process use
// the process's token unless ServerOptions::auth_token says otherwise.
//
//   // at the start of main, with the program's --auth_token_file flag:
//   if (absl::Status s = SetUpClusterToken(token_file); !s.ok()) { ... exit(2); }
//
// The token is not encryption. For that, give every task and client TLS
// files (SetUpTls, or DISTFLOW_TLS_CERT / DISTFLOW_TLS_KEY / DISTFLOW_TLS_CA):
// every gRPC and bulk-transfer connection of the process is then TLS, mutual
// when a CA is given. See the README's Security section.
// Thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "distflow/export.h"

namespace distflow {

inline constexpr char kAuthTokenEnv[] = "DISTFLOW_AUTH_TOKEN";

// The process's token: what SetClusterToken set, else DISTFLOW_AUTH_TOKEN
// (read once), else "" (none).
DISTFLOW_EXPORT std::string ClusterToken();
DISTFLOW_EXPORT void SetClusterToken(std::string token);
// Reads the token from `path` (surrounding whitespace removed) and sets it.
// InvalidArgument naming the file if it cannot be read, is empty or holds
// what ValidateToken refuses.
DISTFLOW_EXPORT absl::Status LoadClusterTokenFile(const std::string& path);
// A token is 1 to 4096 printable ASCII characters (it travels as gRPC
// metadata). `source` names where it came from in the error.
DISTFLOW_EXPORT absl::Status ValidateToken(const std::string& token, const std::string& source);
// For a program's start: loads `token_file` if given, then validates the
// process's token (DISTFLOW_AUTH_TOKEN otherwise). OK when there is none.
DISTFLOW_EXPORT absl::Status SetUpClusterToken(const std::string& token_file);

inline constexpr char kTlsCertEnv[] = "DISTFLOW_TLS_CERT";
inline constexpr char kTlsKeyEnv[] = "DISTFLOW_TLS_KEY";
inline constexpr char kTlsCaEnv[] = "DISTFLOW_TLS_CA";

// PEM files. `cert` (a chain) and `key` are this process's identity: a
// server needs them, a client presents them when servers ask (mutual TLS).
// `ca` verifies the other side: with it, servers demand client certificates
// signed by it and clients accept only servers signed by it; without it,
// clients verify servers against the system's roots. A server's certificate
// must name the host clients dial (a DNS or IP subjectAltName).
struct DISTFLOW_EXPORT TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
};
// For a program's start, with its --tls_cert/--tls_key/--tls_ca flags: each
// one not given is taken from its DISTFLOW_TLS_* variable; the files are read
// and checked, and TLS is on for every connection of the process if any is
// named. InvalidArgument naming the flag or variable and the file otherwise
// (a missing or unreadable file, one that is not PEM, a cert without a key).
// Programs that never call it read the variables on first use.
DISTFLOW_EXPORT absl::Status SetUpTls(const TlsFiles& flags);
// Whether this process's connections use TLS.
DISTFLOW_EXPORT bool TlsEnabled();
// For a server's start: OK when TLS is off or this process has a certificate
// and key to serve with; InvalidArgument naming the flags and variables to
// set otherwise (a CA alone lets a client verify, not a server serve).
DISTFLOW_EXPORT absl::Status CheckTlsCanServe();

}  // namespace distflow
