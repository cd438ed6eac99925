// Cluster authentication: a shared secret token (the functions that set it
// are public, in distflow/auth.h).
//
// Every task and client of a cluster is given the same token
// (DISTFLOW_AUTH_TOKEN, or a file named by --auth_token_file). Clients send it
// with every RPC (metadata "x-distflow-token", added by a channel
// interceptor) and first thing on every bulk-transfer connection; servers
// compare it in constant time and refuse anything else: RPCs with
// UNAUTHENTICATED and a message saying how to fix it, bulk connections by
// closing them. Without a token nothing is checked (a server that listens on
// a non-loopback address then warns). gRPC's health service stays open so
// that probes need no secret.
//
// The token is not encryption; TLS is (ClientCredentials, ServerCredentials,
// set up by SetUpTls): with it every channel and server of the process uses
// TLS, mutual when a CA is given.
//
// The token and TLS state without gRPC are cluster/credentials.h; this file
// puts them on gRPC channels and servers. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cluster/credentials.h"
#include "distflow/auth.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace distflow {

inline constexpr char kAuthTokenMetadataKey[] = "x-distflow-token";
// Credentials for this process's connections: TLS when it is on
// (SetUpTls in distflow/auth.h), insecure otherwise.
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials();
// InvalidArgument when TLS is on but the process has no certificate.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials();
// A channel to `address` whose every call carries `token` (none if empty).
std::shared_ptr<grpc::Channel> NewAuthenticatedChannel(const std::string& address, const grpc::ChannelArguments& args,
                                                       const std::string& token);

// OK if `expected` is empty or the call carries it; UNAUTHENTICATED saying
// what is missing otherwise. `server` names the task in the message.
grpc::Status CheckCallToken(const grpc::ServerContextBase& ctx, const std::string& expected, const std::string& server);

// For a unary handler: null if the call may proceed, else the call's
// reactor, already finished with CheckCallToken's refusal.
grpc::ServerUnaryReactor* RefuseUnauthenticated(grpc::CallbackServerContext* ctx, const std::string& expected,
                                                const std::string& server);

}  // namespace distflow
