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
  return v == nullptr || std::string(v) != "0";
}

std::string NewUnixSocketName() {
  std::random_device rd;
  const uint64_t bits = rd() | (uint64_t{rd()} << 32);
  std::string name = absl::StrCat("distflow-grpc.", getpid(), ".", absl::Hex(bits, absl::kZeroPad16));
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
  std::string a = absl::StrCat(HostIdentity(), " ", name);
  // A metadata value gRPC refuses (it fails the call) would end every
  // GetStatus: announce nothing rather than an odd hostname.
  for (char c : a) {
    if (c < 0x20 || c > 0x7e) return "";
  }
  return HostIdentity().empty() ? "" : a;
}

std::string SameHostUnixSocket(std::string_view announcement) {
  const std::string& mine = HostIdentity();
  const size_t nl = announcement.find(' ');
  if (mine.empty() || nl == std::string_view::npos || announcement.substr(0, nl) != mine) return "";
  std::string_view name = announcement.substr(nl + 1);
  // An abstract name fits sun_path after its leading zero; gRPC's own
  // target syntax needs nothing escaped in ours.
  if (name.empty() || name.size() >= sizeof(sockaddr_un::sun_path) || !name.starts_with("distflow-grpc.")) {
    return "";
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return "";
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
