// Rebuilding a collective group on the coordinator:
// CoordinationService::GroupRendezvous (coordination.h and
// proto/elastic.proto say what it promises).
//
// A fresh job needs no round: each rank's first probe is answered at once
// with generation 1 (the generation every rank of a fresh job is in), until
// the group has a history (a round, ranks waiting, or a second probe from
// one rank: a restarted process), after which a probe joins the round.
//
// Asks do not block: a rank asks, and asks again with the same nonce until
// the round is done, so no handler thread waits on a rank that may never
// come. The generation is one more than the newest generation any rank of
// the round held, so it needs no memory that a restarted coordinator would
// have lost: every rank that survived carries the generation it was in.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "coordination/coordination.h"

namespace distflow {

absl::Status CoordinationService::GroupRendezvous(const proto::GroupRendezvousRequest& req,
                                                  proto::GroupRendezvousResponse* resp) {
  const int n = req.group_size();
  if (n < 1 || req.rank() < 0 || req.rank() >= n) {
    return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: rank ", req.rank(), " is not in a group of ", n,
                                                   " (ranks 0..", n - 1, ") of job '", req.job(), "'"));
  }
  // The group's tasks by rank: a process set's members, else 0..n-1.
  std::vector<int> members(req.members().begin(), req.members().end());
  if (members.empty()) {
    for (int r = 0; r < n; ++r) members.push_back(r);
  } else if (static_cast<int>(members.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("GroupRendezvous: the group of job '", req.job(), "' lists ",
                                                   members.size(), " members but group_size is ", n));
  }
  const int64_t now = env_->NowMicros();
  absl::MutexLock lock(&mu_);
  CheckLocked(now);
  GroupRound& g = groups_[{req.job(), members}];
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
    if (g.generation == 0 && g.waiting.empty() && first->second == req.nonce()) {
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
    auto t = tasks_.find(TaskName(req.job(), members[static_cast<size_t>(it->first)]));
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
  LOG(INFO) << "Collective group of " << n << " task(s) of job '" << req.job() << "' (tasks "
            << absl::StrJoin(members, ", ") << ") rebuilt: generation " << g.generation << ", state from rank "
            << g.root;
  resp->set_done(true);
  resp->set_generation(g.generation);
  resp->set_root(g.root);
  return absl::OkStatus();
}

}  // namespace distflow
