// The cluster token: a shared secret that every task and client of a
// cluster is given, and without which a server refuses RPCs (UNAUTHENTICATED)
// and bulk-transfer connections. Servers and sessions of this process use
// the process's token unless ServerOptions::auth_token says otherwise.
//
//   // at the start of main, with the program's --auth_token_file flag:
//   if (absl::Status s = SetUpClusterToken(token_file); !s.ok()) { ... exit(2); }
//
// The token is not encryption: on an untrusted network, traffic can be read
// and a token seen on the wire replayed (see the README's Security section).
// Thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace distflow {

inline constexpr char kAuthTokenEnv[] = "DISTFLOW_AUTH_TOKEN";

// The process's token: what SetClusterToken set, else DISTFLOW_AUTH_TOKEN
// (read once), else "" (none).
std::string ClusterToken();
void SetClusterToken(std::string token);
// Reads the token from `path` (surrounding whitespace removed) and sets it.
// InvalidArgument naming the file if it cannot be read, is empty or holds
// what ValidateToken refuses.
absl::Status LoadClusterTokenFile(const std::string& path);
// A token is 1 to 4096 printable ASCII characters (it travels as gRPC
// metadata). `source` names where it came from in the error.
absl::Status ValidateToken(const std::string& token, const std::string& source);
// For a program's start: loads `token_file` if given, then validates the
// process's token (DISTFLOW_AUTH_TOKEN otherwise). OK when there is none.
absl::Status SetUpClusterToken(const std::string& token_file);

}  // namespace distflow
