#include "cluster/host_share.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

const std::string& HostIdentity() {
  static const std::string* id = [] {
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    const std::string host = ThisHostName();
    return new std::string(boot.empty() ? std::string() : absl::StrCat(absl::StripAsciiWhitespace(boot), "/", host));
  }();
  return *id;
}

}  // namespace distflow
