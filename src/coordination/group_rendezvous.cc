// Rebuilding a collective group on the coordinator:
// CoordinationService::GroupRendezvous (coordination.h and
// proto/elastic.proto say what it promises).
//
// A fresh job needs no round: each rank's first probe is answered at once
// with generation 1 (the generation every rank of a fresh job is in), until
// the group has a history (a round, or a second probe from one rank: a
// restarted process), after which a probe joins the round. Ranks waiting to
// rebuild are no history of a rank's first probe: a rank whose first run
// failed on a rank that died before the group's first collective starts a
// round at once, and a slower rank probing after it must not join that
// round, which needs the dead rank, but fail its own run in generation 1,
// naming the dead rank (or the ranks that left the generation), as the
// first one did; then it joins the round.
//
// Asks do not block: a rank asks, and asks again with the same nonce until
// the round is done, so no handler thread waits on a rank that may never
// come. The generation is one more than the newest generation any rank of
// the round held, so it needs no memory that a restarted coordinator would
// have lost: every rank that survived carries the generation it was in.
//
// A restarted coordinator has no history, but every rank that survived
// says its generation in each ask and query (HearGenerationLocked): the
// group resumes at the newest heard, so a query after the restart still
// tells a joiner (pending) from a member, and a fixed group's restarted
// rank, probing, joins a round instead of being told generation 1 alone.
//
// A group across jobs (the collective ops' group_tasks: a ps task and two
// workers, say) follows the same rule; it is known by its task names alone,
// since its members ask from different jobs, and a member's death is read
// from the heartbeats of the task its name gives.
//
// An elastic group (group size 0) has no fixed ranks: each round takes
// every task of the job that is not dead and has not left, so a worker that
// joined the job enters at the next round and one that died is not waited
// for once the heartbeats have declared it dead.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "coordination/coordination.h"

namespace distflow {
namespace {

// A group across jobs' task names in their canonical form
// (/job:J/replica:0/task:I, as the heartbeats know them); empty for a
// group of one job. InvalidArgument for a name that is not a task's, or a
// task named twice.
absl::StatusOr<std::vector<std::string>> GroupTasks(const proto::GroupRendezvousRequest& req) {
  std::vector<std::string> tasks;
  for (const std::string& name : req.tasks()) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(name);
    if (!d.ok() || !d->has_job || !d->has_task || d->has_type) {
      return absl::InvalidArgumentError(
          absl::StrCat("GroupRendezvous: the group across jobs names '", name, "', which is not a task name"));
    }
    std::string task = TaskName(d->job, d->task);
    if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
      return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: the group across jobs names ", task, " twice"));
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace

absl::Status CoordinationService::GroupRendezvous(const proto::GroupRendezvousRequest& req,
                                                  proto::GroupRendezvousResponse* resp) {
  const int n = req.group_size();
  if (n == 0) {
    if (req.members_size() > 0 || req.tasks_size() > 0) {
      return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: the elastic group (group_size 0) of job '",
                                                     req.job(), "' takes no members: the coordinator decides them"));
    }
    const int64_t now = env_->NowMicros();
    absl::MutexLock lock(&mu_);
    CheckLocked(now);
    // Known by no members (a fixed group always has some).
    return ElasticRendezvousLocked(req, groups_[{req.job(), std::vector<int>(), std::vector<std::string>()}], resp);
  }
  if (n < 1 || req.rank() < 0 || req.rank() >= n) {
    return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: rank ", req.rank(), " is not in a group of ", n,
                                                   " (ranks 0..", n - 1, ") of job '", req.job(), "'"));
  }
  // The group's tasks by rank: a process set's members, else 0..n-1; or,
  // for a group across jobs, the tasks it names.
  std::vector<int> members(req.members().begin(), req.members().end());
  ASSIGN_OR_RETURN(std::vector<std::string> tasks, GroupTasks(req));
  if (!tasks.empty() && !members.empty()) {
    return absl::InvalidArgumentError(
        "GroupRendezvous: a group across jobs is named by its tasks, and takes no members (task indices of one job)");
  }
  if (members.empty() && tasks.empty()) {
    for (int r = 0; r < n; ++r) members.push_back(r);
  } else if (static_cast<int>(members.size() + tasks.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: the group of job '", req.job(), "' lists ",
                                                   members.size() + tasks.size(), " members but group_size is ", n));
  }
  // Rank r's task, as the heartbeats know it.
  auto task_of = [&](int r) {
    return tasks.empty() ? TaskName(req.job(), members[static_cast<size_t>(r)]) : tasks[static_cast<size_t>(r)];
  };
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  // A group across jobs is asked for from several jobs: known by its tasks alone.
  GroupRound& g = groups_[{tasks.empty() ? req.job() : std::string(), members, tasks}];
  HearGenerationLocked(req, g);
  resp->Clear();
  if (req.query()) {
    for (const auto& [rank, ask] : g.waiting) resp->add_waiting(rank);
    return absl::OkStatus();
  }
  // An ask that took part in the round completed last: tell it the result.
  if (auto it = g.done_nonces.find(req.rank()); it != g.done_nonces.end() && it->second == req.nonce()) {
    resp->set_done(true);
    resp->set_generation(g.generation);
    resp->set_root(g.root);
    return absl::OkStatus();
  }
  if (req.probe()) {
    auto first = g.probed.emplace(req.rank(), req.nonce()).first;
    if (g.generation == 0 && first->second == req.nonce()) {
      // A fresh job: every rank starts in generation 1 without a round.
      resp->set_done(true);
      resp->set_generation(1);
      resp->set_root(0);
      return absl::OkStatus();
    }
  }
  g.waiting[req.rank()] = {req.last_generation(), req.nonce()};
  // A rank that asked and then died will ask again with a new nonce once it
  // is back; until then it is not here.
  for (auto it = g.waiting.begin(); it != g.waiting.end();) {
    auto t = tasks_.find(task_of(it->first));
    const bool dead = t != tasks_.end() && t->second.state == proto::TaskHealth::DEAD;
    it = dead && it->first != req.rank() ? g.waiting.erase(it) : std::next(it);
  }
  if (static_cast<int>(g.waiting.size()) < n) {
    for (int r = 0; r < n; ++r) {
      if (!g.waiting.count(r)) resp->add_missing(r);
    }
    return absl::OkStatus();
  }
  int64_t newest = 0;
  for (const auto& [rank, ask] : g.waiting) newest = std::max(newest, ask.first);
  g.generation = newest + 1;
  g.root = 0;
  for (const auto& [rank, ask] : g.waiting) {
    if (ask.first == newest) {
      g.root = rank;  // the lowest of the oldest: the map is in rank order
      break;
    }
  }
  g.done_nonces.clear();
  for (const auto& [rank, ask] : g.waiting) g.done_nonces[rank] = ask.second;
  g.waiting.clear();
  if (tasks.empty()) {
    LOG(INFO) << "Collective group of " << n << " task(s) of job '" << req.job() << "' (tasks "
              << absl::StrJoin(members, ", ") << ") rebuilt: generation " << g.generation << ", state from rank "
              << g.root;
  } else {
    LOG(INFO) << "Collective group of tasks " << absl::StrJoin(tasks, ", ") << " rebuilt: generation " << g.generation
              << ", state from rank " << g.root << " (" << tasks[static_cast<size_t>(g.root)] << ")";
  }
  resp->set_done(true);
  resp->set_generation(g.generation);
  resp->set_root(g.root);
  return absl::OkStatus();
}

void CoordinationService::HearGenerationLocked(const proto::GroupRendezvousRequest& req, GroupRound& g) {
  const bool elastic = req.group_size() == 0;
  // A fixed group's generation 1 is handed out to probes without a round
  // (and without recording it): hearing it says nothing of a restart.
  const int64_t known = elastic ? g.generation : std::max<int64_t>(g.generation, 1);
  if (req.last_generation() > known) {
    g.generation = req.last_generation();
    g.resumed = true;
    g.members.clear();
    LOG(INFO) << "The coordinator resumes the " << (elastic ? "elastic " : "") << "collective group of job '"
              << req.job() << "' at generation " << g.generation << ", as its task " << req.rank()
              << " says (this coordinator did not build it: it restarted)";
  }
  // An elastic group's members since the resume: the tasks in its generation.
  if (elastic && g.resumed && req.last_generation() == g.generation &&
      std::find(g.members.begin(), g.members.end(), req.rank()) == g.members.end()) {
    g.members.push_back(req.rank());
  }
}

bool CoordinationService::GoneLocked(const std::string& job, int index) const {
  auto t = tasks_.find(TaskName(job, index));
  return t != tasks_.end() &&
         (t->second.state == proto::TaskHealth::DEAD || t->second.state == proto::TaskHealth::LEFT);
}

absl::Status CoordinationService::ElasticRendezvousLocked(const proto::GroupRendezvousRequest& req, GroupRound& g,
                                                          proto::GroupRendezvousResponse* resp) {
  const std::string& job = req.job();
  if (tasks_.find(TaskName(job, req.rank())) == tasks_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: ", TaskName(job, req.rank()),
                                                   " is not a task of the job; a worker that was not in the cluster "
                                                   "spec joins it first (Join)"));
  }
  HearGenerationLocked(req, g);
  resp->Clear();
  // Asks of tasks that died or left since: they will not come.
  for (auto it = g.waiting.begin(); it != g.waiting.end();) {
    it = GoneLocked(job, it->first) && it->first != req.rank() ? g.waiting.erase(it) : std::next(it);
  }
  if (req.query()) {
    for (const auto& [task, ask] : g.waiting) {
      if (req.last_generation() > 0 && ask.first >= req.last_generation()) resp->add_waiting(task);
      if (ask.first < g.generation || g.generation == 0) resp->add_pending(task);
    }
    for (int m : g.members) {
      if (GoneLocked(job, m)) resp->add_gone(m);
    }
    return absl::OkStatus();
  }
  if (auto it = g.done_nonces.find(req.rank()); it != g.done_nonces.end() && it->second == req.nonce()) {
    resp->set_done(true);
    resp->set_generation(g.generation);
    resp->set_root(0);
    for (int m : g.members) resp->add_members(m);
    return absl::OkStatus();
  }
  g.waiting[req.rank()] = {req.last_generation(), req.nonce()};
  bool complete = true;
  for (const auto& [name, t] : tasks_) {
    if (t.job != job || t.index < 0 || GoneLocked(job, t.index)) continue;
    if (!g.waiting.count(t.index)) {
      resp->add_missing(t.index);
      complete = false;
    }
  }
  if (!complete) return absl::OkStatus();
  int64_t newest = 0;
  for (const auto& [task, ask] : g.waiting) newest = std::max(newest, ask.first);
  std::vector<int> members;
  for (const auto& [task, ask] : g.waiting) {
    if (ask.first == newest) members.push_back(task);  // the oldest first: rank 0 holds the newest state
  }
  for (const auto& [task, ask] : g.waiting) {
    if (ask.first != newest) members.push_back(task);
  }
  g.generation = newest + 1;
  g.root = 0;
  g.members = members;
  g.resumed = false;
  g.done_nonces.clear();
  for (const auto& [task, ask] : g.waiting) g.done_nonces[task] = ask.second;
  g.waiting.clear();
  LOG(INFO) << "Elastic collective group of job '" << job << "' built: generation " << g.generation << ", "
            << members.size() << " rank(s), tasks " << absl::StrJoin(members, ",") << " in rank order (state from task "
            << members.front() << ")";
  resp->set_done(true);
  resp->set_generation(g.generation);
  resp->set_root(0);
  for (int m : members) resp->add_members(m);
  return absl::OkStatus();
}

}  // namespace distflow
