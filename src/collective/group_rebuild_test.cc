// Generations of a collective group (collective_executor_impl.h), with N
// ranks in one process: a rank that "restarts" (a fresh executor, counting
// from 0 again) pairs with the ranks that kept running once every rank has
// met at the rendezvous, and CollectiveBcastSend(from_group_root) sends the
// oldest rank's value. The rendezvous here follows the coordinator's rule
// (proto/elastic.proto); the coordinator's own is tested in
// coordination_test, the whole path with real processes in
// tests/python/test_horovod_recovery.py.
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective/collective_test_util.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// One group's rendezvous for ranks of one process: rank r's function asks
// for r.
class TestRendezvous {
 public:
  explicit TestRendezvous(int n) : n_(n) {}
  GroupRendezvousFn For(int rank) {
    return [this, rank](const GroupAsk& ask) -> absl::StatusOr<GroupAnswer> {
      absl::MutexLock lock(&mu_);
      GroupAnswer a;
      if (ask.query) {
        for (const auto& [r, w] : waiting_) absl::StrAppend(&a.waiting, a.waiting.empty() ? "" : ", ", "rank ", r);
        return a;
      }
      ++asks_;
      if (ask.probe && generation_ == 0 && probed_.emplace(rank, ask.nonce).first->second == ask.nonce) {
        a.done = true;
        a.generation = 1;
        return a;
      }
      if (done_.count(rank) && done_[rank] == ask.nonce) {
        a.done = true;
        a.generation = generation_;
        a.root = root_;
        return a;
      }
      waiting_[rank] = {ask.last_generation, ask.nonce};
      if (static_cast<int>(waiting_.size()) < n_) {
        a.missing = absl::StrCat(n_ - static_cast<int>(waiting_.size()), " rank(s)");
        return a;
      }
      int64_t newest = 0;
      for (const auto& [r, w] : waiting_) newest = std::max(newest, w.first);
      generation_ = newest + 1;
      for (const auto& [r, w] : waiting_) {
        if (w.first == newest) {
          root_ = r;
          break;
        }
      }
      done_.clear();
      for (const auto& [r, w] : waiting_) done_[r] = w.second;
      waiting_.clear();
      a.done = true;
      a.generation = generation_;
      a.root = root_;
      return a;
    };
  }
  int asks() {
    absl::MutexLock lock(&mu_);
    return asks_;
  }

 private:
  const int n_;
  absl::Mutex mu_;
  std::map<int, std::pair<int64_t, uint64_t>> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> done_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> probed_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int root_ ABSL_GUARDED_BY(mu_) = 0;
  int asks_ ABSL_GUARDED_BY(mu_) = 0;
};

CollectiveParams Sum(int n) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "allreduce";
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = 7;
  p.dtype = DT_FLOAT;
  return p;
}

CollectiveParams FromRoot(int n) {
  CollectiveParams p;
  p.kind = CollectiveKind::kBroadcastSend;
  p.node_name = "broadcast";
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = 8;
  p.dtype = DT_FLOAT;
  p.shape = TensorShape({1});
  p.from_group_root = true;
  return p;
}

// Horovod's broadcast from root_rank in an elastic group: rank `root` of
// the group's last build sends.
CollectiveParams FromRank(int root) {
  CollectiveParams p = FromRoot(0);
  p.from_group_root = false;
  p.root_rank = root;
  p.instance_key = 9;
  return p;
}

std::vector<Tensor> Values(std::vector<float> v) {
  std::vector<Tensor> out;
  for (float x : v) out.push_back(Tensor::FromVector<float>({x}));
  return out;
}

// Rank `rank` starts again: a fresh executor with the same transport and
// rendezvous, as a restarted process has.
void Restart(Ranks* ranks, TestRendezvous* rendezvous, int rank) {
  auto& e = ranks->executors[static_cast<size_t>(rank)];
  e = std::make_unique<CollectiveExecutorImpl>(ranks->hub.TransportFor(rank));
  e->SetRendezvous(rendezvous->For(rank), absl::Seconds(30));
}

void ExpectAll(const std::vector<absl::StatusOr<Tensor>>& out, float value) {
  for (size_t r = 0; r < out.size(); ++r) {
    ASSERT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r].status();
    EXPECT_EQ(out[r]->flat<float>()[0], value) << "rank " << r;
  }
}

TEST(GroupRebuild, ARestartedRankPairsWithTheSurvivorsInANewGeneration) {
  Ranks ranks(3);
  TestRendezvous rendezvous(3);
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  for (int run = 0; run < 2; ++run) ExpectAll(ranks.Run(Sum(3), Values({1, 2, 3})), 6);
  EXPECT_EQ(ranks.executors[0]->generation(3), 1);
  // Rank 2 restarts: it counts from run 0 again, the survivors are at run 2
  // (their failed run broke the group).
  Restart(&ranks, &rendezvous, 2);
  ranks.executors[0]->MarkBroken(3);
  ranks.executors[1]->MarkBroken(3);
  // The survivors hold the state (10); the restarted rank a fresh one (-1).
  ExpectAll(ranks.Run(FromRoot(3), Values({10, 10, -1})), 10);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ranks.executors[static_cast<size_t>(r)]->generation(3), 2) << "rank " << r;
  ExpectAll(ranks.Run(Sum(3), Values({1, 2, 3})), 6);
}

TEST(GroupRebuild, WhenRankZeroRestartsTheStateComesFromRankOne) {
  Ranks ranks(3);
  TestRendezvous rendezvous(3);
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  ExpectAll(ranks.Run(FromRoot(3), Values({5, 6, 7})), 5);  // at the start: rank 0
  Restart(&ranks, &rendezvous, 0);
  ranks.executors[1]->MarkBroken(3);
  ranks.executors[2]->MarkBroken(3);
  ExpectAll(ranks.Run(FromRoot(3), Values({-1, 6, 7})), 6);
}

TEST(GroupRebuild, AFailedRunBreaksTheGroupAndTheNextRunRebuildsIt) {
  Ranks ranks(3);
  TestRendezvous rendezvous(3);
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  ExpectAll(ranks.Run(Sum(3), Values({1, 2, 3})), 6);
  // Rank 2 runs another instance than its peers: every run times out,
  // and the failures break the group on every rank.
  std::vector<CollectiveParams> mismatched(3, Sum(3));
  for (auto& p : mismatched) p.timeout_seconds = 0.2;
  mismatched[2].instance_key = 9;
  auto failed = ranks.RunEach(mismatched, Values({1, 2, 3}));
  for (const auto& r : failed) EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  ExpectAll(ranks.Run(Sum(3), Values({1, 2, 3})), 6);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ranks.executors[static_cast<size_t>(r)]->generation(3), 2) << "rank " << r;
}

TEST(GroupRebuild, ARunOfAGenerationOthersHaveLeftFailsNamingThem) {
  Ranks ranks(3);
  TestRendezvous rendezvous(3);
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  ExpectAll(ranks.Run(Sum(3), Values({1, 2, 3})), 6);
  // Ranks 0 and 1 left generation 1 (their run failed, say) and wait to
  // rebuild the group; rank 2's run of generation 1 waits for them. It
  // fails naming them, and rank 2 joins the rebuild at once.
  ranks.executors[0]->MarkBroken(3);
  ranks.executors[1]->MarkBroken(3);
  std::vector<absl::StatusOr<Tensor>> survivors;
  std::thread peers([&] { survivors = ranks.Run(Sum(3), Values({1, 2, 3}), {0, 1}); });
  auto failed = ranks.Run(Sum(3), Values({1, 2, 3}), {2});
  ASSERT_FALSE(failed[2].ok());
  EXPECT_TRUE(absl::IsUnavailable(failed[2].status())) << failed[2].status();
  EXPECT_NE(failed[2].status().message().find("left generation 1"), std::string::npos) << failed[2].status();
  EXPECT_NE(failed[2].status().message().find("rank 0, rank 1"), std::string::npos) << failed[2].status();
  // Rank 2 runs its step again, now in generation 2 with its peers.
  auto again = ranks.Run(Sum(3), Values({1, 2, 3}), {2});
  peers.join();
  ASSERT_TRUE(again[2].ok()) << again[2].status();
  EXPECT_EQ(again[2]->flat<float>()[0], 6);
  for (int r : {0, 1}) {
    ASSERT_TRUE(survivors[static_cast<size_t>(r)].ok()) << survivors[static_cast<size_t>(r)].status();
    EXPECT_EQ(survivors[static_cast<size_t>(r)]->flat<float>()[0], 6);
  }
  EXPECT_EQ(ranks.executors[2]->generation(3), 2);
}

TEST(GroupRebuild, ARebuildThatNeverCompletesFailsTheRunNamingWhoIsMissing) {
  Ranks ranks(2);
  TestRendezvous rendezvous(2);
  for (int r = 0; r < 2; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Milliseconds(300));
  ExpectAll(ranks.Run(Sum(2), Values({1, 2})), 3);  // a fresh group: generation 1, no round
  ranks.executors[0]->MarkBroken(2);
  auto out = ranks.Run(Sum(2), Values({1, 2}), {0});
  ASSERT_FALSE(out[0].ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out[0].status())) << out[0].status();
  EXPECT_NE(out[0].status().message().find("CollectiveReduce 'allreduce'"), std::string::npos) << out[0].status();
  EXPECT_NE(out[0].status().message().find("not joined yet: 1 rank(s)"), std::string::npos) << out[0].status();
  EXPECT_GE(rendezvous.asks(), 3) << "the rank polls the rendezvous";
}

TEST(GroupRebuild, CancellingTheStepEndsAWaitForTheRebuild) {
  Ranks ranks(2);
  TestRendezvous rendezvous(2);
  for (int r = 0; r < 2; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Minutes(5));
  ExpectAll(ranks.Run(Sum(2), Values({1, 2})), 3);
  ranks.executors[0]->MarkBroken(2);
  CancellationManager cm;
  absl::Notification done;
  absl::StatusOr<Tensor> out = absl::UnknownError("did not run");
  ranks.executors[0]->Run(Sum(2), Tensor::FromVector<float>({1}), &cm, [&](absl::StatusOr<Tensor> t) {
    out = std::move(t);
    done.Notify();
  });
  EXPECT_FALSE(done.HasBeenNotified()) << "rank 1 never asks: the run waits for the rebuild";
  cm.StartCancel(absl::DeadlineExceededError("the step's deadline"));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  // The step's first error (why it was cancelled), in its own code.
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("to be rebuilt"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("the step's deadline"), std::string::npos) << out.status();
}

// The owner (a server) tears down what its rendezvous reaches (the
// coordination agent, the peers' cache) after Shutdown: a rebuild in flight,
// polling a round that never completes, must have ended by then, and nothing
// may ask the rendezvous afterwards, though the executor itself lives on.
// The ask (an RPC to the coordinator) blocks on a gate the test opens only
// once Shutdown has begun, so Shutdown always meets an ask under way.
TEST(GroupRebuild, ShutdownEndsARebuildInFlightBeforeItsOwnerGoes) {
  struct Owner {
    absl::Mutex mu;
    bool gone ABSL_GUARDED_BY(mu) = false;
    bool shut_down ABSL_GUARDED_BY(mu) = false;  // Shutdown returned
    int inside ABSL_GUARDED_BY(mu) = 0;          // asks under way
    int asks ABSL_GUARDED_BY(mu) = 0;
    int asks_after_gone ABSL_GUARDED_BY(mu) = 0;
    int asks_ended_after_shutdown ABSL_GUARDED_BY(mu) = 0;
    absl::Notification gate;
  };
  auto owner = std::make_shared<Owner>();
  Ranks ranks(2);
  ranks.executors[1]->SetRendezvous(
      [owner](const GroupAsk&) -> absl::StatusOr<GroupAnswer> {
        {
          absl::MutexLock lock(&owner->mu);
          ++owner->inside;
          ++owner->asks;
          if (owner->gone) ++owner->asks_after_gone;
        }
        EXPECT_TRUE(owner->gate.WaitForNotificationWithTimeout(kHang)) << "the test never opened the gate";
        absl::MutexLock lock(&owner->mu);
        --owner->inside;
        if (owner->shut_down) ++owner->asks_ended_after_shutdown;
        GroupAnswer a;
        a.missing = "rank 0";  // rank 0 never asks
        return a;
      },
      absl::Minutes(5));
  CancellationManager cm;
  absl::Notification done;
  absl::StatusOr<Tensor> out = absl::UnknownError("did not run");
  ranks.executors[1]->Run(Sum(2), Tensor::FromVector<float>({1}), &cm, [&](absl::StatusOr<Tensor> t) {
    out = std::move(t);
    done.Notify();
  });
  {
    absl::MutexLock lock(&owner->mu);
    auto asking = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return owner->inside == 1; };
    ASSERT_TRUE(owner->mu.AwaitWithTimeout(absl::Condition(&asking), kHang)) << "the rebuild never asked";
  }
  std::thread shutdown([&] {
    ranks.executors[1]->Shutdown();
    absl::MutexLock lock(&owner->mu);
    owner->shut_down = true;
  });
  // Shutdown fails the runs waiting for the rebuild before it waits for
  // the rebuild's thread: once the run has failed, Shutdown is waiting (or
  // about to), and it cannot return while the ask is held at the gate.
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  {
    absl::MutexLock lock(&owner->mu);
    EXPECT_FALSE(owner->shut_down) << "Shutdown returned with an ask under way";
    EXPECT_EQ(owner->inside, 1);
  }
  owner->gate.Notify();
  shutdown.join();
  {
    absl::MutexLock lock(&owner->mu);
    EXPECT_EQ(owner->inside, 0) << "an ask is still under way after Shutdown returned";
    EXPECT_EQ(owner->asks_ended_after_shutdown, 0) << "Shutdown returned before the ask under way ended";
    owner->gone = true;
  }
  EXPECT_TRUE(absl::IsCancelled(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("shutting down"), std::string::npos) << out.status();
  // Later runs that need a rebuild, and RebuildNow, are refused at once.
  absl::Notification later_done;
  absl::StatusOr<Tensor> later = absl::UnknownError("did not run");
  ranks.executors[1]->Run(Sum(2), Tensor::FromVector<float>({1}), &cm, [&](absl::StatusOr<Tensor> t) {
    later = std::move(t);
    later_done.Notify();
  });
  ASSERT_TRUE(later_done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(absl::IsCancelled(later.status())) << later.status();
  EXPECT_NE(later.status().message().find("shutting down"), std::string::npos) << later.status();
  absl::StatusOr<GroupState> now = ranks.executors[1]->RebuildNow(2, absl::Seconds(1));
  EXPECT_TRUE(absl::IsCancelled(now.status())) << now.status();
  ranks.executors[1]->Shutdown();  // idempotent
  absl::MutexLock lock(&owner->mu);
  EXPECT_EQ(owner->asks_after_gone, 0);
}

// The coordinator's elastic rule for in-process ranks: a round completes
// once every rank in `live` has asked; members are the oldest first.
class ElasticRendezvous {
 public:
  void SetLive(std::set<int> live) {
    absl::MutexLock lock(&mu_);
    live_ = std::move(live);
  }
  // Asks about groups other than the elastic one.
  int fixed_asks() {
    absl::MutexLock lock(&mu_);
    return fixed_asks_;
  }
  GroupRendezvousFn For(int task) {
    return [this, task](const GroupAsk& ask) -> absl::StatusOr<GroupAnswer> {
      absl::MutexLock lock(&mu_);
      GroupAnswer a;
      if (ask.query) return a;
      if (ask.group_size != 0) {  // a fixed group or a process set: a fresh job's first probe
        ++fixed_asks_;
        a.done = true;
        a.generation = 1;
        return a;
      }
      if (done_.count(task) && done_[task] == ask.nonce) {
        a.done = true;
        a.generation = generation_;
        a.members = members_;
        return a;
      }
      waiting_[task] = {ask.last_generation, ask.nonce};
      for (int t : live_) {
        if (!waiting_.count(t)) {
          a.missing = absl::StrCat("task ", t);
          return a;
        }
      }
      int64_t newest = 0;
      for (const auto& [t, w] : waiting_) newest = std::max(newest, w.first);
      members_.clear();
      for (const auto& [t, w] : waiting_) {
        if (w.first == newest) members_.push_back(t);
      }
      for (const auto& [t, w] : waiting_) {
        if (w.first != newest) members_.push_back(t);
      }
      generation_ = newest + 1;
      done_.clear();
      for (const auto& [t, w] : waiting_) done_[t] = w.second;
      waiting_.clear();
      a.done = true;
      a.generation = generation_;
      a.members = members_;
      return a;
    };
  }

 private:
  absl::Mutex mu_;
  std::set<int> live_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::pair<int64_t, uint64_t>> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> done_ ABSL_GUARDED_BY(mu_);
  std::vector<int> members_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int fixed_asks_ ABSL_GUARDED_BY(mu_) = 0;
};

// RebuildNow on each rank of `which` at once; each rank's group.
std::map<int, GroupState> RebuildAll(Ranks* ranks, const std::vector<int>& which) {
  std::map<int, GroupState> out;
  absl::Mutex mu;
  std::vector<std::thread> threads;
  for (int r : which) {
    threads.emplace_back([&, r] {
      absl::StatusOr<GroupState> g = ranks->executors[static_cast<size_t>(r)]->RebuildNow(0, kHang);
      ASSERT_TRUE(g.ok()) << "rank " << r << ": " << g.status();
      absl::MutexLock lock(&mu);
      out[r] = *g;
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(ElasticGroup, GrowsWithAJoinerAndShrinksWithoutTheDeadAndTheStateComesFromTheOldest) {
  Ranks ranks(3);
  ElasticRendezvous rendezvous;
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  CollectiveParams mean = Sum(0);  // group_size 0: the elastic group
  mean.final_op = FinalOp::kDiv;
  // Tasks 0 and 1 start; the mean divides by the group's size at run time.
  rendezvous.SetLive({0, 1});
  std::map<int, GroupState> built = RebuildAll(&ranks, {0, 1});
  EXPECT_EQ(built[0].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(built[0].generation, 1);
  auto two = ranks.Run(mean, Values({1, 2, 0}), {0, 1});
  for (int r : {0, 1}) EXPECT_EQ(two[static_cast<size_t>(r)]->flat<float>()[0], 1.5f) << "rank " << r;
  // Task 2 joins: the group grows to 3, and task 2 takes task 0's value.
  rendezvous.SetLive({0, 1, 2});
  built = RebuildAll(&ranks, {0, 1, 2});
  EXPECT_EQ(built[2].members, (std::vector<int>{0, 1, 2})) << "the joiner comes after the oldest";
  EXPECT_EQ(built[2].generation, 2);
  ExpectAll(ranks.Run(FromRoot(0), Values({10, 10, -1})), 10);
  ExpectAll(ranks.Run(mean, Values({1, 2, 6})), 3);
  ExpectAll(ranks.Run(FromRank(2), Values({-1, -2, 30})), 30);
  // Task 0 dies: tasks 1 and 2 go on as a group of 2 with task 1 as rank 0.
  rendezvous.SetLive({1, 2});
  built = RebuildAll(&ranks, {1, 2});
  EXPECT_EQ(built[1].members, (std::vector<int>{1, 2}));
  auto survivors = ranks.Run(FromRoot(0), Values({-1, 20, 20}), {1, 2});
  for (int r : {1, 2}) EXPECT_EQ(survivors[static_cast<size_t>(r)]->flat<float>()[0], 20) << "rank " << r;
  survivors = ranks.Run(mean, Values({0, 2, 6}), {1, 2});
  for (int r : {1, 2}) EXPECT_EQ(survivors[static_cast<size_t>(r)]->flat<float>()[0], 4) << "rank " << r;
  // root_rank names a rank of the last build: rank 1 is task 2 now, and
  // rank 2 is gone, which every rank is told naming the root and the size.
  survivors = ranks.Run(FromRank(1), Values({-1, -2, 40}), {1, 2});
  for (int r : {1, 2}) EXPECT_EQ(survivors[static_cast<size_t>(r)]->flat<float>()[0], 40) << "rank " << r;
  survivors = ranks.Run(FromRank(2), Values({-1, -2, 40}), {1, 2});
  for (int r : {1, 2}) {
    ASSERT_FALSE(survivors[static_cast<size_t>(r)].ok()) << "rank " << r;
    EXPECT_NE(survivors[static_cast<size_t>(r)].status().message().find(
                  "root_rank 2 is not a rank of the group of size 2 (0..1)"),
              std::string::npos)
        << survivors[static_cast<size_t>(r)].status();
  }
  // The failed run broke the group; the next run rebuilds it and succeeds.
  survivors = ranks.Run(FromRank(1), Values({-1, -2, 50}), {1, 2});
  for (int r : {1, 2}) {
    ASSERT_TRUE(survivors[static_cast<size_t>(r)].ok()) << survivors[static_cast<size_t>(r)].status();
    EXPECT_EQ(survivors[static_cast<size_t>(r)]->flat<float>()[0], 50) << "rank " << r;
  }
}

// The elastic group is a group of its own: a process set and the fixed
// group of the same tasks keep their generations while it grows and shrinks.
TEST(ElasticGroup, RunsBesideAProcessSetAndAFixedGroupEachInItsOwnGeneration) {
  Ranks ranks(3);
  ElasticRendezvous rendezvous;
  for (int r = 0; r < 3; ++r)
    ranks.executors[static_cast<size_t>(r)]->SetRendezvous(rendezvous.For(r), absl::Seconds(30));
  rendezvous.SetLive({0, 1, 2});
  RebuildAll(&ranks, {0, 1, 2});
  CollectiveParams elastic = Sum(0);
  CollectiveParams set = Sum(2);  // a process set: tasks 0 and 2
  set.members = {0, 2};
  set.group_key = 2;
  CollectiveParams fixed = Sum(3);
  fixed.group_key = 3;
  ExpectAll(ranks.Run(elastic, Values({1, 2, 3})), 6);
  auto in_set = ranks.Run(set, Values({1, -1, 4}), {0, 2});
  for (int r : {0, 2}) {
    ASSERT_TRUE(in_set[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << in_set[static_cast<size_t>(r)].status();
    EXPECT_EQ(in_set[static_cast<size_t>(r)]->flat<float>()[0], 5) << "rank " << r;
  }
  ExpectAll(ranks.Run(fixed, Values({1, 2, 4})), 7);
  EXPECT_EQ(rendezvous.fixed_asks(), 5) << "each of the set's 2 and the fixed group's 3 ranks probed once";
  // Task 1 leaves: the elastic group shrinks to tasks 0 and 2; the process
  // set goes on in its generation, without a rebuild.
  rendezvous.SetLive({0, 2});
  std::map<int, GroupState> built = RebuildAll(&ranks, {0, 2});
  EXPECT_EQ(built[0].members, (std::vector<int>{0, 2}));
  EXPECT_EQ(ranks.executors[0]->generation(0), 2);
  auto two = ranks.Run(elastic, Values({1, -1, 4}), {0, 2});
  in_set = ranks.Run(set, Values({2, -1, 3}), {0, 2});
  for (int r : {0, 2}) {
    ASSERT_TRUE(two[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << two[static_cast<size_t>(r)].status();
    EXPECT_EQ(two[static_cast<size_t>(r)]->flat<float>()[0], 5) << "rank " << r;
    ASSERT_TRUE(in_set[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << in_set[static_cast<size_t>(r)].status();
    EXPECT_EQ(in_set[static_cast<size_t>(r)]->flat<float>()[0], 5) << "rank " << r;
  }
  EXPECT_EQ(rendezvous.fixed_asks(), 5) << "the process set was not rebuilt";
  EXPECT_EQ(ranks.executors[0]->generation(3), 1) << "the fixed group of 3 keeps its generation";
}

TEST(ElasticGroup, TakesNoGroupMembers) {
  Ranks ranks(2);
  CollectiveParams listed = Sum(0);
  listed.members = {0, 1};
  auto out = ranks.Run(listed, Values({1, 2}));
  for (const auto& r : out) {
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("takes no group_members"), std::string::npos) << r.status();
  }
}

TEST(ElasticGroup, WithoutARendezvousAnElasticRunFailsSayingWhy) {
  Ranks ranks(2);
  auto out = ranks.Run(Sum(0), Values({1, 2}));
  for (const auto& r : out) {
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("elastic group"), std::string::npos) << r.status();
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(ranks.executors[0]->RebuildNow(0, absl::Seconds(1)).status()));
}

}  // namespace
}  // namespace distflow
