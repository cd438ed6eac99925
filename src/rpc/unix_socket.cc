#include "rpc/unix_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "cluster/host_share.h"

namespace distflow {

bool UnixSocketsEnabledByEnv() {
  const char* v = std::getenv("DISTFLOW_UNIX_SOCKETS");
  return v != nullptr && std::string(v) == "1";
}

namespace {

std::string RandomHex() {
  std::random_device rd;
  return absl::StrCat(absl::Hex(rd() | (uint64_t{rd()} << 32), absl::kZeroPad16));
}

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'; }

// Longest name we make or accept: an abstract name fits sun_path after its
// leading zero byte.
constexpr size_t kMaxName = sizeof(sockaddr_un::sun_path) - 1;

}  // namespace

std::string NewUnixSocketName(const std::string& host, int port) {
  // The TCP address's port and host: no other task of this network
  // namespace can hold them, and a task restarted on them listens on the
  // same name, so its peers' channels reconnect to it as over TCP. On an
  // odd host (or port 0, chosen later), a random name.
  std::string name = absl::StrCat("distflow-grpc.", port, ".", host);
  for (char& c : name) {
    if (!IsNameChar(c)) c = '-';  // an IPv6 address's colons
  }
  if (port <= 0 || host.empty() || name.size() > kMaxName) {
    name = absl::StrCat("distflow-grpc.0.", getpid(), "-", RandomHex());
  }
  // gRPC cannot start a server whose port it cannot bind, so try the name
  // first: a sandbox without Unix-domain sockets keeps the server on TCP.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    LOG(WARNING) << "gRPC between tasks on this host stays on TCP: no Unix-domain socket (" << std::strerror(errno)
                 << ")";
    return "";
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  const int err = errno;
  close(fd);  // frees the name at once (abstract names linger nowhere)
  if (!bound) {
    LOG(WARNING) << "gRPC between tasks on this host stays on TCP: cannot bind the abstract socket @" << name << " ("
                 << std::strerror(err) << ")";
    return "";
  }
  return name;
}

std::string UnixSocketAnnouncement(const std::string& name) {
  const std::string& identity = HostIdentity();
  std::string a = absl::StrCat(identity, " ", name, " ", RandomHex());
  // A metadata value gRPC refuses (it fails the call) would end every
  // GetStatus: announce nothing rather than an odd hostname.
  for (char c : a) {
    if (c < 0x20 || c > 0x7e) return "";
  }
  return identity.empty() || identity.find(' ') != std::string::npos ? "" : a;
}

std::string SameHostUnixSocket(std::string_view announcement) {
  const std::string& mine = HostIdentity();
  const size_t first = announcement.find(' ');
  if (mine.empty() || first == std::string_view::npos || announcement.substr(0, first) != mine) return "";
  const std::string_view rest = announcement.substr(first + 1);
  const size_t second = rest.find(' ');
  if (second == std::string_view::npos) return "";
  const std::string_view name = rest.substr(0, second), nonce = rest.substr(second + 1);
  // gRPC's target syntax needs nothing escaped in names of these characters.
  if (name.size() > kMaxName || !name.starts_with("distflow-grpc.") || nonce.size() != 16) return "";
  for (char c : name) {
    if (!IsNameChar(c)) return "";
  }
  for (char c : nonce) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return "";
  }
  return std::string(name);
}

std::string UnixSocketTarget(const std::string& name) { return absl::StrCat("unix-abstract:", name); }

const char* TransportOfPeer(std::string_view peer) { return peer.starts_with("unix") ? "unix" : "tcp"; }

void CountChannel(const char* transport) {
  Metrics::Global()
      ->GetCounter("distflow_rpc_channels_total",
                   "gRPC channels this process opened to peer tasks, by transport (unix: an abstract Unix-domain "
                   "socket to a task on this host; tcp)",
                   {{"transport", transport}})
      ->Increment();
}

}  // namespace distflow
