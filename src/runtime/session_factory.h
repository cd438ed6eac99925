// Sessions by target. NewSession("" or "local") is a LocalSession; any other
// target goes to the factory registered for the longest prefix it starts
// with ("grpc://": the distributed runtime, server/grpc_session.h). The
// client (client/session.cc) knows no transport: a program that links the
// distributed runtime registers it (RegisterGrpcSessionFactory, called by
// Server::Create and, in libdistflow.so, when the library loads).
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distflow/session_options.h"
#include "runtime/local_session.h"

namespace distflow {

using SessionFactory =
    std::function<absl::StatusOr<std::unique_ptr<SessionInterface>>(const std::string& target, SessionOptions options)>;

// Registers `factory` for targets that start with `prefix` (not empty); a
// second registration for the same prefix replaces the first.
void RegisterSessionFactory(const std::string& prefix, SessionFactory factory);

// A session on `target`; InvalidArgument naming the target if no factory
// takes it.
absl::StatusOr<std::unique_ptr<SessionInterface>> NewSession(const std::string& target, SessionOptions options);

}  // namespace distflow
