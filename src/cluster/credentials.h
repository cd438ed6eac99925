// The process's cluster credentials without gRPC: the shared token and the
// TLS files (set through the public functions of distflow/auth.h), and the
// helpers both transports use to check them. rpc/auth.h puts them on gRPC
// channels and servers; bulk/ on its TCP connections. Thread-safe.
#pragma once

#include <string>

#include "distflow/auth.h"

namespace distflow {

// The PEM contents TLS uses (read once, see SetUpTls); false when TLS is off.
bool ProcessTlsPem(std::string* cert, std::string* key, std::string* ca);

// Constant-time comparison (the time depends only on the lengths).
bool TokensEqual(const std::string& a, const std::string& b);

// Whether `host` is a loopback name or address (localhost, 127.x, ::1).
bool IsLoopbackHost(const std::string& host);

}  // namespace distflow
