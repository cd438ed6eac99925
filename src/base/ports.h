// Picking a TCP port for a server that another process will be told about
// before it binds (a cluster spec written in advance, a test's fixture).
//
// A port the kernel hands out for port 0 is in its ephemeral range, the same
// range it hands to every other port-0 bind and outgoing connection: between
// the pick and the server's bind, another process's bulk port or client
// socket can take it, and the server then fails to start. PickUnusedTcpPort
// picks below that range instead, where the kernel never assigns ports
// itself; only another explicit picker can collide, and the random choice
// makes that unlikely. Thread-safe.
#ifndef DISTFLOW_BASE_PORTS_H_
#define DISTFLOW_BASE_PORTS_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace distflow {

// A port free, when asked, on `host` (an IPv4 address; "" and "localhost" mean
// 127.0.0.1) and on the wildcard address. Falls back to a kernel-chosen port
// when the range below the ephemeral one is too small or full.
absl::StatusOr<int> PickUnusedTcpPort(const std::string& host = "127.0.0.1");

// The kernel's ephemeral port range, from /proc/sys/net/ipv4/ip_local_port_range
// (32768-60999, Linux's default, when that cannot be read).
std::pair<int, int> EphemeralPortRange();

}  // namespace distflow

#endif  // DISTFLOW_BASE_PORTS_H_
