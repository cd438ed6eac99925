#include "cluster/host_share.h"

#include <unistd.h>

#include <algorithm>

#include "cluster/credentials.h"

namespace distflow {
namespace {

std::string ThisHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

bool IsThisMachine(const std::string& host, const std::string& hostname) {
  return IsLoopbackHost(host) || (!hostname.empty() && host == hostname);
}

}  // namespace

int TasksOnHost(const ClusterSpec& cluster, const std::string& host) {
  const std::string hostname = ThisHostName();
  const bool local = IsThisMachine(host, hostname);
  int n = 0;
  for (const auto& [job, tasks] : cluster.job_map()) {
    for (const auto& [index, address] : tasks) {
      absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
      if (!hp.ok()) continue;
      if (hp->first == host || (local && IsThisMachine(hp->first, hostname))) ++n;
    }
  }
  return std::max(1, n);
}

}  // namespace distflow
