#include "collective/in_process_transport.h"

#include <atomic>
#include <deque>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace distflow {

// One rank's sent tensors by key, and the receives waiting for them. A run
// aborted on this rank (by prefix) fails its waiters and later takes.
class InProcessCollectives::Mailbox {
 public:
  using Done = CollectiveChannel::RecvCallback;

  absl::Status Put(const std::string& prefix, const std::string& key, Tensor t) {
    Done waiter;
    {
      absl::MutexLock lock(&mu_);
      if (!dead_.ok()) return dead_;
      if (auto a = aborted_.find(prefix); a != aborted_.end()) return a->second;
      bytes_sent_ += static_cast<int64_t>(t.TotalBytes());
      Slot& slot = slots_[key];
      if (slot.waiters.empty()) {
        slot.values.push_back(std::move(t));
        return absl::OkStatus();
      }
      waiter = std::move(slot.waiters.front());
      slot.waiters.pop_front();
      if (slot.waiters.empty() && slot.values.empty()) slots_.erase(key);
    }
    waiter(absl::OkStatus(), std::move(t));
    return absl::OkStatus();
  }

  void Take(const std::string& prefix, const std::string& key, Done done) {
    Tensor t;
    absl::Status s;
    {
      absl::MutexLock lock(&mu_);
      if (!dead_.ok()) {
        s = dead_;
      } else if (auto a = aborted_.find(prefix); a != aborted_.end()) {
        s = a->second;
      } else {
        Slot& slot = slots_[key];
        if (slot.values.empty()) {
          slot.waiters.push_back(std::move(done));
          return;
        }
        t = std::move(slot.values.front());
        slot.values.pop_front();
        if (slot.waiters.empty() && slot.values.empty()) slots_.erase(key);
      }
    }
    done(s, std::move(t));
  }

  // Fails the waiters of keys starting with `prefix` (all if empty) and
  // drops their tensors; `forever` marks the whole mailbox dead.
  void Abort(const std::string& prefix, const absl::Status& status, bool forever) {
    std::vector<Done> failed;
    {
      absl::MutexLock lock(&mu_);
      if (forever) {
        dead_ = status;
      } else {
        aborted_.emplace(prefix, status);
      }
      for (auto it = slots_.begin(); it != slots_.end();) {
        if (!forever && it->first.compare(0, prefix.size(), prefix) != 0) {
          ++it;
          continue;
        }
        for (Done& d : it->second.waiters) failed.push_back(std::move(d));
        it = slots_.erase(it);
      }
    }
    for (Done& d : failed) d(status, Tensor());
  }

  size_t NumPending() const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [key, slot] : slots_) n += slot.values.size();
    return n;
  }

  int64_t BytesSent() const {
    absl::MutexLock lock(&mu_);
    return bytes_sent_;
  }

 private:
  struct Slot {
    std::deque<Tensor> values;
    std::deque<Done> waiters;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status> aborted_ ABSL_GUARDED_BY(mu_);
  absl::Status dead_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

using Mailbox = InProcessCollectives::Mailbox;

class InProcessChannel final : public CollectiveChannel {
 public:
  InProcessChannel(std::vector<Mailbox*> boxes, int rank, std::string prefix)
      : boxes_(std::move(boxes)), rank_(rank), prefix_(std::move(prefix)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(boxes_.size()); }
  std::string RankName(int r) const override { return absl::StrCat("rank ", r, " (in-process)"); }

  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    return boxes_[static_cast<size_t>(rank_)]->Put(prefix_, Key(rank_, to, tag), value);
  }

  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    const std::string key = Key(from, rank_, tag);
    auto once = std::make_shared<std::atomic<bool>>(false);
    auto wrapped = [this, from, once, done = std::move(done)](absl::Status s, Tensor t) {
      if (once->exchange(true)) return;
      if (!s.ok()) s = absl::Status(s.code(), absl::StrCat(RankName(from), ": ", s.message()));
      done(std::move(s), std::move(t));
    };
    // Our own abort must end this wait too: the waiter sits in the peer's box.
    absl::Status aborted;
    {
      absl::MutexLock lock(&mu_);
      aborted = aborted_;
      if (aborted.ok()) cancels_.push_back([wrapped](const absl::Status& s) { wrapped(s, Tensor()); });
    }
    if (!aborted.ok()) {
      wrapped(aborted, Tensor());
      return;
    }
    boxes_[static_cast<size_t>(from)]->Take(prefix_, key, wrapped);
  }

  void Abort(const absl::Status& status) override {
    std::vector<std::function<void(const absl::Status&)>> cancels;
    {
      absl::MutexLock lock(&mu_);
      if (!aborted_.ok()) return;
      aborted_ = status;
      cancels.swap(cancels_);
    }
    boxes_[static_cast<size_t>(rank_)]->Abort(prefix_, status, /*forever=*/false);
    for (auto& c : cancels) c(status);
  }

 private:
  std::string Key(int from, int to, const std::string& tag) const {
    return absl::StrCat(prefix_, tag, ";", from, ">", to);
  }

  const std::vector<Mailbox*> boxes_;
  const int rank_;
  const std::string prefix_;
  absl::Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const absl::Status&)>> cancels_ ABSL_GUARDED_BY(mu_);
};

class InProcessTransport final : public CollectiveTransport {
 public:
  InProcessTransport(std::vector<Mailbox*> boxes, int rank) : boxes_(std::move(boxes)), rank_(rank) {}

  absl::StatusOr<std::shared_ptr<CollectiveChannel>> Open(const CollectiveParams& params, int64_t seq) override {
    // A group's members are hub ranks (a process set's, the elastic group's
    // last build, or 0..group_size-1).
    const std::vector<int> members = GroupMembers(params);
    std::vector<Mailbox*> group;
    int rank = -1;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] < 0 || members[i] >= static_cast<int>(boxes_.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("group member ", members[i], " is not one of the ", boxes_.size(), " in-process ranks"));
      }
      if (members[i] == rank_) rank = static_cast<int>(i);
      group.push_back(boxes_[static_cast<size_t>(members[i])]);
    }
    if (rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, " is not in the group (members ",
                                                     absl::StrJoin(members, ", "), ") of ", boxes_.size(),
                                                     " in-process ranks"));
    }
    return std::shared_ptr<CollectiveChannel>(std::make_shared<InProcessChannel>(
        std::move(group), rank,
        absl::StrCat(params.generation, ";", params.group_key, ";", params.instance_key, ";", seq, ";")));
  }

 private:
  const std::vector<Mailbox*> boxes_;
  const int rank_;
};

}  // namespace

InProcessCollectives::InProcessCollectives(int num_ranks) {
  for (int i = 0; i < num_ranks; ++i) mailboxes_.push_back(std::make_unique<Mailbox>());
}

InProcessCollectives::~InProcessCollectives() = default;

std::unique_ptr<CollectiveTransport> InProcessCollectives::TransportFor(int rank) {
  std::vector<Mailbox*> boxes;
  for (auto& m : mailboxes_) boxes.push_back(m.get());
  return std::make_unique<InProcessTransport>(std::move(boxes), rank);
}

void InProcessCollectives::KillRank(int rank) {
  mailboxes_[static_cast<size_t>(rank)]->Abort(
      "", absl::UnavailableError(absl::StrCat("rank ", rank, " is gone (killed by the test)")), /*forever=*/true);
}

int64_t InProcessCollectives::BytesSent(int rank) const { return mailboxes_[static_cast<size_t>(rank)]->BytesSent(); }

size_t InProcessCollectives::NumPending() const {
  size_t n = 0;
  for (const auto& m : mailboxes_) n += m->NumPending();
  return n;
}

}  // namespace distflow
