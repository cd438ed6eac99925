#include "base/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace distflow {
namespace {

constexpr int kLowestPort = 10000;  // below it: well-known and registered services

// Binds a fresh socket to address:port (port 0 = the kernel's choice) and
// returns the bound port, or -errno.
int TryBind(in_addr_t address, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = address;
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  int result;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    result = -errno;
  } else {
    result = ntohs(a.sin_port);
  }
  ::close(fd);
  return result;
}

// Ports already handed out in this process: a cluster spec picked port by
// port must not name one twice (none of them is bound yet).
absl::Mutex given_mu;
std::set<int>& Given() ABSL_EXCLUSIVE_LOCKS_REQUIRED(given_mu) {
  static auto* given = new std::set<int>;
  return *given;
}

}  // namespace

std::pair<int, int> EphemeralPortRange() {
  std::pair<int, int> range{32768, 60999};
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 0 && hi >= lo && hi < 65536) range = {lo, hi};
    std::fclose(f);
  }
  return range;
}

absl::StatusOr<int> PickUnusedTcpPort(const std::string& host) {
  in_addr address{};
  const std::string ip = host.empty() || host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, ip.c_str(), &address) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot pick a port on '", host, "': not an IPv4 address; give a numeric one such as 127.0.0.1"));
  }
  auto [lo, hi] = EphemeralPortRange();
  // Below the ephemeral range if there is room; above it otherwise.
  int first = kLowestPort, last = lo - 1;
  if (last - first < 1000) first = hi + 1, last = 65535;
  if (last - first >= 1000) {
    std::random_device seed;
    std::mt19937 rng(seed());
    std::uniform_int_distribution<int> pick(first, last);
    for (int attempt = 0; attempt < 200; ++attempt) {
      int port = pick(rng);
      // Free on the wildcard address too, so a server listening on 0.0.0.0 can bind it.
      absl::MutexLock lock(&given_mu);
      if (Given().count(port) == 0 && TryBind(address.s_addr, port) == port &&
          TryBind(htonl(INADDR_ANY), port) == port) {
        Given().insert(port);
        return port;
      }
    }
  }
  int port = TryBind(address.s_addr, 0);
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat("Cannot find a free TCP port on ", ip, ": ", std::strerror(-port)));
  }
  return port;
}

}  // namespace distflow
