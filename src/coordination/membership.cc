// Elastic membership on the coordinator: CoordinationService::Join and
// Members (coordination.h says what they promise).
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "coordination/coordination.h"

namespace distflow {
namespace {

bool ValidJobName(const std::string& job) {
  if (job.empty()) return false;
  for (char c : job) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<int> CoordinationService::Join(const std::string& job, const std::string& address,
                                              ClusterSpec* cluster) {
  if (!ValidJobName(job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Join: job '", job, "' is not a job name (letters, digits, '_' or '-'); workers join 'worker'"));
  }
  if (absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address); !hp.ok() || hp->second == 0) {
    return absl::InvalidArgumentError(absl::StrCat("Join: '", address, "' is not the host:port (port not 0) the ",
                                                   "joining task serves on",
                                                   hp.ok() ? "" : absl::StrCat(": ", hp.status().message())));
  }
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  int index = -1, next = 0;
  for (const auto& [name, t] : tasks_) {
    if (t.job == job) next = std::max(next, t.index + 1);
    if (t.address != address) continue;
    if (t.state == proto::TaskHealth::ALIVE) {
      return absl::FailedPreconditionError(absl::StrCat("Join: ", address, " is already ", name,
                                                        ", which is alive; give the joining task another port"));
    }
    if (t.job != job) {
      return absl::FailedPreconditionError(
          absl::StrCat("Join: ", address, " is the address of ", name, "; a task of job '", job, "' cannot take it"));
    }
    index = t.index;  // a replacement on the address of a task that is gone
  }
  if (index < 0) index = next;
  const std::string name = TaskName(job, index);
  Task& t = tasks_[name];
  const bool replaces = !t.job.empty();
  t.job = job;
  t.index = index;
  t.address = address;
  t.joined = t.joined || !replaces;
  // Alive from now: a task that joins and never heartbeats is declared dead
  // after the timeout like any other.
  t.state = proto::TaskHealth::ALIVE;
  t.incarnation = 0;
  t.last_us = now;
  LOG(INFO) << name << " joined the job from " << address << (replaces ? " (in the place of a task that is gone)" : "");
  if (cluster != nullptr) {
    ASSIGN_OR_RETURN(ClusterSpec live, LiveClusterLocked());
    *cluster = std::move(live);
  }
  return index;
}

absl::Status CoordinationService::Rejoin(const std::string& task, const std::string& address) {
  // "/job:J/replica:0/task:T"
  std::string job;
  int index = -1;
  for (absl::string_view part : absl::StrSplit(task, '/')) {
    if (absl::ConsumePrefix(&part, "job:")) job = std::string(part);
    if (absl::ConsumePrefix(&part, "task:") && !absl::SimpleAtoi(part, &index)) index = -1;
  }
  if (!ValidJobName(job) || index < 0 || TaskName(job, index) != task) {
    return absl::InvalidArgumentError(
        absl::StrCat("Rejoin: '", task, "' is not a task name (/job:J/replica:0/task:T)"));
  }
  if (absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address); !hp.ok() || hp->second == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Rejoin: ", task, " gave the address '", address, "', which is not a host:port"));
  }
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  if (auto it = tasks_.find(task); it != tasks_.end()) {
    if (it->second.address.empty() || it->second.address == address) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("Rejoin: ", task, " is ", it->second.address, " now, not ",
                                                      address, ": another task took its index; join anew"));
  }
  for (const auto& [name, other] : tasks_) {
    if (other.address == address && other.state == proto::TaskHealth::ALIVE) {
      return absl::FailedPreconditionError(absl::StrCat("Rejoin: ", task, " at ", address, ", the address of ", name,
                                                        ", which is alive: the task cannot rejoin on it"));
    }
  }
  Task& t = tasks_[task];
  t.job = job;
  t.index = index;
  t.address = address;
  t.joined = true;
  t.state = proto::TaskHealth::ALIVE;
  t.last_us = now;
  LOG(INFO) << task << " rejoined the job from " << address << " (it had joined before this coordinator started)";
  return absl::OkStatus();
}

absl::StatusOr<ClusterSpec> CoordinationService::LiveClusterLocked() const {
  ClusterSpec::JobMap jobs;
  for (const auto& [name, t] : tasks_) {
    if (t.address.empty() || t.job.empty() || t.index < 0) continue;
    const bool gone = t.state == proto::TaskHealth::DEAD || t.state == proto::TaskHealth::LEFT;
    // The spec's tasks stay (they may come back on their address); a joined
    // task that is gone is no longer part of the job.
    if (gone && t.joined) continue;
    jobs[t.job][t.index] = t.address;
  }
  return ClusterSpec::FromJobs(std::move(jobs));
}

std::vector<proto::Member> CoordinationService::Members() {
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  std::vector<proto::Member> out;
  for (const auto& [name, t] : tasks_) {
    proto::Member m;
    m.set_task(name);
    m.set_address(t.address);
    m.set_state(t.state);
    m.set_joined(t.joined);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace distflow
