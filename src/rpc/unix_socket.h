// gRPC between tasks on one machine over abstract Unix-domain sockets
// instead of loopback TCP (docs/TRANSPORT.md, "gRPC between tasks on one
// host").
//
// A server listens on its TCP address and, unless TLS is on or
// DISTFLOW_UNIX_SOCKETS=0, on an abstract socket with a fresh random name
// (NewUnixSocketName). It announces the name, with this machine's identity
// (cluster/host_share.h, HostIdentity), in the initial metadata of its
// GetStatus answers to callers that carry the cluster token. A WorkerCache
// asks a peer's TCP address once; when the identity is its own, it dials the
// named socket and switches to it after one call over it has succeeded (a
// peer in another network namespace has no such socket in ours: that call
// fails and the peer stays on TCP). The name is random, so it cannot name
// another task, and the answer came from the task at the peer's address, so
// a peer on another machine that uses the same port is never dialled there.
// Stateless helpers; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace distflow {

// The GetStatus answer's initial metadata that announces the socket.
inline constexpr char kUnixSocketMetadataKey[] = "x-distflow-unix-socket";

// False when DISTFLOW_UNIX_SOCKETS=0 is in the environment (read per call:
// servers and caches read it when they start).
bool UnixSocketsEnabledByEnv();

// A fresh name for a server's abstract socket, unique per process and server
// ("distflow-grpc.<pid>.<64 random bits>"); "" if this process cannot listen
// on an abstract socket (tried once, with a socket bound and closed at once).
std::string NewUnixSocketName();

// What a server with socket `name` announces: "<host identity> <name>" (a
// metadata value: printable ASCII, no newline); "" if this machine's
// identity is unknown or unprintable.
std::string UnixSocketAnnouncement(const std::string& name);
// The socket name in `announcement` if it comes from this machine; "" if it
// does not, if it is malformed, or if this machine's identity is unknown.
std::string SameHostUnixSocket(std::string_view announcement);

// gRPC's target for abstract socket `name`.
std::string UnixSocketTarget(const std::string& name);

// "unix" for a peer address gRPC spells "unix:..." or "unix-abstract:...",
// "tcp" for any other.
const char* TransportOfPeer(std::string_view peer);

// Counts a channel this process opened to a peer task, by transport
// ("unix" or "tcp"): distflow_rpc_channels_total{transport}.
void CountChannel(const char* transport);

}  // namespace distflow
