#include "coordination/coordination.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/logging.h"
#include "rpc/coordinator_client.h"

namespace distflow {
namespace {

std::string Seconds(int64_t ms) { return absl::StrFormat("%.1f s", static_cast<double>(ms) / 1000.0); }

bool IsPsTask(const std::string& task) { return absl::StartsWith(task, "/job:ps/"); }

}  // namespace

std::string ChiefTask(const ClusterSpec& cluster) {
  if (cluster.HasJob("chief") && !cluster.task_indices("chief").empty()) {
    return TaskName("chief", cluster.task_indices("chief").front());
  }
  if (cluster.HasJob("worker") && !cluster.task_indices("worker").empty()) {
    return TaskName("worker", cluster.task_indices("worker").front());
  }
  for (const std::string& job : cluster.jobs())
    if (!cluster.task_indices(job).empty()) return TaskName(job, cluster.task_indices(job).front());
  return "";
}

std::string CoordinatorTask(const ClusterSpec& cluster) {
  if (cluster.HasJob(kCoordinatorJobName) && !cluster.task_indices(kCoordinatorJobName).empty()) {
    return TaskName(kCoordinatorJobName, cluster.task_indices(kCoordinatorJobName).front());
  }
  if (cluster.HasJob("ps") && !cluster.task_indices("ps").empty()) {
    return TaskName("ps", cluster.task_indices("ps").front());
  }
  return ChiefTask(cluster);
}

// ---------------------------------------------------------------------------

CoordinationService::CoordinationService(std::vector<std::string> tasks, absl::Duration timeout, uint64_t incarnation,
                                         Env* env)
    : timeout_(timeout), incarnation_(incarnation), env_(env) {
  for (std::string& name : tasks) {
    Task& t = tasks_[name];
    // "/job:J/replica:0/task:T"
    for (absl::string_view part : absl::StrSplit(name, '/')) {
      if (absl::ConsumePrefix(&part, "job:")) t.job = std::string(part);
      if (absl::ConsumePrefix(&part, "task:") && !absl::SimpleAtoi(part, &t.index)) t.index = -1;
    }
  }
}

CoordinationService::CoordinationService(const ClusterSpec& cluster, absl::Duration timeout, uint64_t incarnation,
                                         Env* env)
    : timeout_(timeout), incarnation_(incarnation), env_(env) {
  for (const auto& [job, tasks] : cluster.job_map()) {
    for (const auto& [index, address] : tasks) {
      Task& t = tasks_[TaskName(job, index)];
      t.job = job;
      t.index = index;
      t.address = address;
    }
  }
}

absl::Status CoordinationService::Heartbeat(const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp) {
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(req.task());
  if (it == tasks_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Heartbeat from '", req.task(),
                                                   "', which is not a task of this cluster: is it running with "
                                                   "another cluster spec?"));
  }
  Task& t = it->second;
  if (req.leaving()) {
    // A goodbye from an earlier incarnation does not end the current one
    // (0: a task that joined and has not heartbeated yet).
    if (t.state == proto::TaskHealth::UNKNOWN || t.incarnation == 0 || t.incarnation == req.incarnation()) {
      t.state = proto::TaskHealth::LEFT;
      t.incarnation = req.incarnation();
      t.last_us = now;
      LOG(INFO) << req.task() << " left the cluster";
    }
  } else {
    if (t.state == proto::TaskHealth::DEAD) {
      LOG(INFO) << req.task() << (t.incarnation == req.incarnation() ? " answers again" : " has restarted")
                << " after being declared dead";
    } else if (t.state == proto::TaskHealth::ALIVE && t.incarnation != 0 && t.incarnation != req.incarnation()) {
      LOG(INFO) << req.task() << " has restarted (new incarnation)";
    }
    t.state = proto::TaskHealth::ALIVE;
    t.incarnation = req.incarnation();
    t.last_us = now;
  }
  CheckLocked(now);
  SnapshotLocked(now, resp);
  return absl::OkStatus();
}

void CoordinationService::Check() {
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
}

void CoordinationService::LoopRan(absl::Duration interval) {
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);  // a late run is a pause: the rule applies before it counts as a run
  loop_us_ = now;
  loop_interval_ = interval;
}

void CoordinationService::ResumedLocked(int64_t now) {
  if (loop_us_ == 0) return;
  const absl::Duration gap = absl::Microseconds(now - loop_us_);
  if (gap <= loop_interval_ + timeout_) return;
  int restarted = 0;
  for (auto& [name, t] : tasks_) {
    if (t.state != proto::TaskHealth::ALIVE) continue;
    t.last_us = std::max(t.last_us, now);
    ++restarted;
  }
  // Counts as a run: the rule fires once per gap.
  loop_us_ = now;
  LOG(WARNING) << "The coordinator's own heartbeat loop did not run for " << Seconds(gap / absl::Milliseconds(1))
               << " (this process was paused, swapped out or starved; the limit is " << absl::FormatDuration(timeout_)
               << "): it heard no task in that gap, so none is declared dead for "
               << "it; the deadlines of " << restarted << " live task(s) restart now";
}

void CoordinationService::CheckLocked(int64_t now) {
  ResumedLocked(now);
  for (auto& [name, t] : tasks_) {
    if (t.state != proto::TaskHealth::ALIVE) continue;
    if (absl::Microseconds(now - t.last_us) > timeout_) {
      t.state = proto::TaskHealth::DEAD;
      LOG(WARNING) << name << " is declared dead: no heartbeat for " << Seconds((now - t.last_us) / 1000)
                   << " (the limit is " << absl::FormatDuration(timeout_) << ")";
    }
  }
}

void CoordinationService::Snapshot(proto::HeartbeatResponse* resp) {
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  SnapshotLocked(now, resp);
}

void CoordinationService::SnapshotLocked(int64_t now, proto::HeartbeatResponse* resp) {
  resp->clear_tasks();
  resp->set_coordinator_incarnation(incarnation_);
  resp->set_timeout_ms(absl::ToInt64Milliseconds(timeout_));
  for (const auto& [name, t] : tasks_) {
    proto::TaskHealth* h = resp->add_tasks();
    h->set_task(name);
    h->set_state(t.state);
    h->set_incarnation(t.incarnation);
    if (t.state == proto::TaskHealth::ALIVE || t.state == proto::TaskHealth::DEAD) {
      h->set_silent_ms((now - t.last_us) / 1000);
    }
  }
}

// ---------------------------------------------------------------------------

CoordinationAgent::CoordinationAgent(std::string task, uint64_t incarnation, std::string coordinator,
                                     CoordinationOptions options, WorkerCache* peers, CoordinationService* local,
                                     Env* env)
    : task_(std::move(task)),
      incarnation_(incarnation),
      coordinator_(std::move(coordinator)),
      options_(options),
      peers_(peers),
      local_(local),
      env_(env) {}

CoordinationAgent::~CoordinationAgent() { Stop(false); }

void CoordinationAgent::SetCallbacks(DeadCallback on_dead, std::function<void()> on_tick) {
  on_dead_ = std::move(on_dead);
  on_tick_ = std::move(on_tick);
}

void CoordinationAgent::Start(DeadCallback on_dead, std::function<void()> on_tick) {
  SetCallbacks(std::move(on_dead), std::move(on_tick));
  thread_ = std::thread([this] { Loop(); });
}

void CoordinationAgent::Loop() {
  // Until the coordinator first answers, ask again every 100 ms: a task the
  // coordinator never heard from is never declared dead, so one that starts
  // before the coordinator and hangs or is cut off in its first interval
  // would otherwise go unnoticed.
  auto wait = [this] {
    absl::MutexLock lock(&mu_);
    const bool reached = local_ != nullptr || last_reached_us_ != 0;
    return reached ? options_.interval : std::min(options_.interval, absl::Milliseconds(100));
  };
  do {
    Turn();
  } while (!stop_.WaitForNotificationWithTimeout(wait()));
}

void CoordinationAgent::Turn() {
  if (local_ != nullptr) {
    local_->LoopRan(options_.interval);
  } else {
    // The same rule on this side: after a pause of this process, the
    // coordinator's silence in the gap is no evidence against it.
    const int64_t now = env_->NowMicros();
    absl::MutexLock lock(&mu_);
    if (last_turn_us_ != 0 && last_reached_us_ != 0 &&
        absl::Microseconds(now - last_turn_us_) > options_.interval + options_.timeout) {
      last_reached_us_ = std::max(last_reached_us_, now);
    }
    last_turn_us_ = now;
  }
  Tick();
}

void CoordinationAgent::Stop(bool leaving) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_.HasBeenNotified()) stop_.Notify();
  }
  if (thread_.joinable()) thread_.join();
  if (!leaving || local_ != nullptr || peers_ == nullptr) return;
  proto::HeartbeatRequest req;
  req.set_task(task_);
  req.set_incarnation(incarnation_);
  req.set_leaving(true);
  proto::HeartbeatResponse resp;
  (void)CoordinatorHeartbeat(peers_, coordinator_, req, &resp, options_.interval);
}

absl::Status CoordinationAgent::Beat(proto::HeartbeatResponse* resp) {
  proto::HeartbeatRequest req;
  req.set_task(task_);
  req.set_incarnation(incarnation_);
  if (local_ != nullptr) return local_->Heartbeat(req, resp);
  return CoordinatorHeartbeat(peers_, coordinator_, req, resp, std::max(options_.interval, absl::Milliseconds(500)));
}

void CoordinationAgent::Tick() {
  proto::HeartbeatResponse resp;
  absl::Status s = Beat(&resp);
  // Refused as unknown after having been accepted: the coordinator
  // restarted and forgot that this task joined. (A task started with the
  // wrong cluster is never accepted, so it is not taken in this way.)
  bool accepted_before = false;
  {
    absl::MutexLock lock(&mu_);
    accepted_before = last_reached_us_ != 0;
  }
  if (absl::IsInvalidArgument(s) && accepted_before && local_ == nullptr && !options_.address.empty() &&
      RejoinCoordinator()) {
    s = Beat(&resp);
  }
  const int64_t now = env_->NowMicros();
  std::vector<std::string> newly_dead;
  {
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      if (coordinator_dead_) LOG(INFO) << "The coordinator " << coordinator_ << " answers again";
      coordinator_dead_ = false;
      last_reached_us_ = now;
      coordinator_incarnation_ = resp.coordinator_incarnation();
      for (const proto::TaskHealth& h : resp.tasks()) {
        proto::TaskHealth& old = view_[h.task()];
        if (h.state() == proto::TaskHealth::DEAD && old.state() != proto::TaskHealth::DEAD && h.task() != task_) {
          newly_dead.push_back(h.task());
        }
        old = h;
      }
    } else if (last_reached_us_ != 0 && !coordinator_dead_ &&
               absl::Microseconds(now - last_reached_us_) > options_.timeout) {
      coordinator_dead_ = true;
      newly_dead.push_back(coordinator_);
      LOG(WARNING) << "The coordinator " << coordinator_ << " has not answered heartbeats for "
                   << Seconds((now - last_reached_us_) / 1000) << ": " << s.message();
    }
  }
  Report(newly_dead);
  if (on_tick_) on_tick_();
}

bool CoordinationAgent::RejoinCoordinator() {
  proto::RejoinRequest req;
  req.set_task(task_);
  req.set_address(options_.address);
  absl::Status s = CoordinatorRejoin(peers_, coordinator_, req, std::max(options_.interval, absl::Milliseconds(500)));
  if (!s.ok()) {
    LOG(WARNING) << "The coordinator " << coordinator_ << " does not know " << task_
                 << " and did not take it back: " << s.message();
    return false;
  }
  LOG(INFO) << "The coordinator " << coordinator_ << " had restarted: " << task_ << " rejoined the job as "
            << options_.address;
  return true;
}

void CoordinationAgent::Report(const std::vector<std::string>& newly_dead) {
  for (const std::string& task : newly_dead) {
    std::string msg = DeathMessage(task);
    if (msg.empty()) continue;
    if (task != coordinator_ || local_ != nullptr) LOG(WARNING) << msg;
    if (on_dead_) on_dead_(task, absl::UnavailableError(msg));
  }
}

std::map<std::string, proto::TaskHealth> CoordinationAgent::View() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

std::vector<std::string> CoordinationAgent::DeadTasks() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, h] : view_)
    if (h.state() == proto::TaskHealth::DEAD && name != coordinator_) out.push_back(name);
  if (coordinator_dead_) out.push_back(coordinator_);
  std::sort(out.begin(), out.end());
  return out;
}

std::string CoordinationAgent::DeathMessage(const std::string& task) const {
  absl::MutexLock lock(&mu_);
  const int64_t timeout_ms = absl::ToInt64Milliseconds(options_.timeout);
  if (task == coordinator_ && coordinator_dead_) {
    return absl::StrCat("Task ", task, " (the cluster's coordinator) has not answered heartbeats for over ",
                        Seconds(timeout_ms), ": it died, hangs or is cut off from ", task_,
                        " (the limit is --heartbeat_timeout_secs)");
  }
  auto it = view_.find(task);
  if (it == view_.end() || it->second.state() != proto::TaskHealth::DEAD) return "";
  return absl::StrCat("Task ", task, " stopped answering: no heartbeat for ", Seconds(it->second.silent_ms()),
                      ", so the coordinator ", coordinator_,
                      " declared it dead (it died, hangs or is cut off; the limit is --heartbeat_timeout_secs)");
}

std::string CoordinationAgent::GoneReason(const std::string& task) const {
  absl::MutexLock lock(&mu_);
  auto it = view_.find(task);
  if (it == view_.end()) return "";
  if (it->second.state() == proto::TaskHealth::DEAD) {
    return absl::StrCat("the coordinator ", coordinator_, " declared it dead: no heartbeat for ",
                        Seconds(it->second.silent_ms()), " (the limit is ",
                        Seconds(absl::ToInt64Milliseconds(options_.timeout)),
                        ", --heartbeat_timeout_secs); it died, hangs or is cut off");
  }
  if (it->second.state() == proto::TaskHealth::LEFT) {
    return absl::StrCat("it left the job (its server stopped cleanly; the coordinator ", coordinator_,
                        " recorded its goodbye)");
  }
  return "";
}

absl::Duration CoordinationAgent::CoordinatorSilence() const {
  absl::MutexLock lock(&mu_);
  if (local_ != nullptr || last_reached_us_ == 0) return absl::ZeroDuration();
  return absl::Microseconds(env_->NowMicros() - last_reached_us_);
}

std::string OrphanReason(const CoordinationAgent& agent, const std::string& chief, absl::Duration grace) {
  const absl::Duration timeout = agent.options().timeout;
  if (absl::Duration silence = agent.CoordinatorSilence(); silence > timeout + grace) {
    return absl::StrCat("the coordinator ", agent.coordinator(), " has not answered for ",
                        Seconds(absl::ToInt64Milliseconds(silence)));
  }
  const std::map<std::string, proto::TaskHealth> view = agent.View();
  auto long_dead = [&](const proto::TaskHealth& h) {
    return h.state() == proto::TaskHealth::DEAD && absl::Milliseconds(h.silent_ms()) > timeout + grace;
  };
  if (auto c = view.find(chief); c != view.end() && long_dead(c->second)) {
    return absl::StrCat("the chief ", chief, " died (no heartbeat for ", Seconds(c->second.silent_ms()),
                        ") and has not come back");
  }
  int dead = 0, left = 0, others = 0;
  for (const auto& [name, h] : view) {
    if (IsPsTask(name)) continue;
    if (h.state() == proto::TaskHealth::DEAD && long_dead(h)) {
      ++dead;
    } else if (h.state() == proto::TaskHealth::LEFT) {
      ++left;
    } else {
      ++others;
    }
  }
  if (dead > 0 && others == 0) {
    return absl::StrCat("every worker is gone (", dead, " died, ", left, " finished) and none has come back");
  }
  return "";
}

}  // namespace distflow
