// gRPC between tasks on one machine over abstract Unix-domain sockets
// instead of loopback TCP (docs/TRANSPORT.md, "gRPC between tasks on one
// host").
//
// Off by default (opt in with DISTFLOW_UNIX_SOCKETS=1: a short-lived
// process can abort at exit while a probe's call is being torn down,
// docs/TRANSPORT.md). A server listens on its TCP address and, when on and
// TLS is off, on an abstract socket named after that address
// (NewUnixSocketName). It announces the name, with this machine's identity
// (cluster/host_share.h, HostIdentity) and a nonce drawn at its start, in
// the initial metadata of its GetStatus answers to callers that carry the
// cluster token. A WorkerCache asks a peer's TCP address once; when the
// identity is its own, it dials the named socket and switches to it after
// one call over it has succeeded and announced the very same (nonce
// included): a peer in another network namespace has no socket of that
// name in ours, or another task's, whose nonce differs, and stays on TCP.
// The answer came from the task at the peer's address, so a peer on
// another machine that uses the same port is never dialled on a socket.
// Stateless helpers; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace distflow {

// The GetStatus answer's initial metadata that announces the socket.
inline constexpr char kUnixSocketMetadataKey[] = "x-distflow-unix-socket";

// True only when DISTFLOW_UNIX_SOCKETS=1 is in the environment (read per
// call: servers and caches read it when they start).
bool UnixSocketsEnabledByEnv();

// The name of the abstract socket of a server whose TCP address is
// host:port: "distflow-grpc.<port>.<host>" (a task restarted on its address
// takes the same name, so its peers' socket channels reconnect to it), a
// random one for port 0; "" if this process cannot listen on an abstract
// socket (tried with a socket bound and closed at once) or the name is
// taken.
std::string NewUnixSocketName(const std::string& host, int port);

// What a server with socket `name` announces: "<host identity> <name>
// <nonce>", the nonce drawn anew at each call (a metadata value: printable
// ASCII, no newline); "" if this machine's identity is unknown or odd.
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
