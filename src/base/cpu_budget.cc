#include "base/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace distflow {
namespace {

bool ReadSmallFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The process's cgroup path for `controller` ("" for the v2 unified line
// "0::/path"), from /proc/self/cgroup; false if there is none.
bool CgroupPath(const std::string& controller, std::string* path) {
  std::string text;
  if (!ReadSmallFile("/proc/self/cgroup", &text)) return false;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string ctrls = line.substr(a + 1, b - a - 1);
    bool match = controller.empty() ? ctrls.empty() : false;
    if (!controller.empty()) {
      std::istringstream names(ctrls);
      std::string name;
      while (std::getline(names, name, ','))
        if (name == controller) match = true;
    }
    if (match) {
      *path = line.substr(b + 1);
      return true;
    }
  }
  return false;
}

// The tightest cgroup v2 limit on the way from the process's cgroup to the root.
int CgroupV2Cpus() {
  std::string rel;
  if (!CgroupPath("", &rel)) return 0;
  int best = 0;
  for (;;) {
    std::string text;
    if (ReadSmallFile("/sys/fs/cgroup" + (rel == "/" ? std::string() : rel) + "/cpu.max", &text)) {
      int n = CpusFromCgroupV2Max(text);
      if (n > 0 && (best == 0 || n < best)) best = n;
    }
    if (rel.empty() || rel == "/") break;
    size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  return best;
}

int CgroupV1Cpus() {
  std::string rel;
  if (!CgroupPath("cpu", &rel)) return 0;
  for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    std::string quota, period;
    const std::string dir = std::string(mount) + (rel == "/" ? std::string() : rel);
    if (ReadSmallFile(dir + "/cpu.cfs_quota_us", &quota) && ReadSmallFile(dir + "/cpu.cfs_period_us", &period)) {
      int64_t q = 0, p = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota), &q) ||
          !absl::SimpleAtoi(absl::StripAsciiWhitespace(period), &p)) {
        return 0;
      }
      return CpusFromCgroupV1(q, p);
    }
  }
  return 0;
}

}  // namespace

int CpusFromCgroupV2Max(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  int64_t period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  int64_t q = 0;
  if (!absl::SimpleAtoi(quota, &q)) return 0;
  return CpusFromCgroupV1(q, period);
}

int CpusFromCgroupV1(int64_t quota_us, int64_t period_us) {
  if (quota_us <= 0 || period_us <= 0) return 0;
  return static_cast<int>(std::max<int64_t>(1, (quota_us + period_us - 1) / period_us));
}

int AvailableCpus() {
  int n = AffinityCpus();
  for (int limit : {CgroupV2Cpus(), CgroupV1Cpus()}) {
    if (limit > 0) n = std::min(n, limit);
  }
  return std::max(1, n);
}

int ThreadsPerTask(int cpus, int tasks_on_host) { return std::max(1, cpus / std::max(1, tasks_on_host)); }

}  // namespace distflow
