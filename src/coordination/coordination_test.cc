// Failure detection: the coordination service's states, on a fake clock; the
// membership (joins, the live cluster, refusals); the rebuilds of collective
// groups. The agents' side is in coordination_agent_test.cc.
#include "coordination/coordination.h"

#include <atomic>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "base/wait_until.h"
#include "coordination/coordination_test_util.h"
#include "distflow/server.h"
#include "gtest/gtest.h"
#include "rpc/worker_cache.h"
#include "server/grpc_server.h"

namespace distflow::coordination_test {
namespace {

TEST(CoordinationService, TheCoordinatorIsTheCoordinatorJobsTaskElsePs0ElseTheChief) {
  auto coordinator_of = [](const std::string& spec) {
    absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(spec);
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    return cluster.ok() ? CoordinatorTask(*cluster) : "";
  };
  // Elastic all-reduce: a task outside the workers, so worker 0 may die.
  EXPECT_EQ(coordinator_of("coordinator|h:1,worker|h:2;h:3"), "/job:coordinator/replica:0/task:0");
  EXPECT_EQ(coordinator_of("ps|h:1,worker|h:2"), kPs);
  EXPECT_EQ(coordinator_of("worker|h:2;h:3"), kChief);
  EXPECT_EQ(coordinator_of("chief|h:1,worker|h:2"), "/job:chief/replica:0/task:0");
}

TEST(CoordinationService, TasksAreUnknownThenAliveThenDeadThenBack) {
  FakeClockEnv env;
  CoordinationService service({kPs, kChief, kWorker1}, absl::Seconds(10), 7, &env);
  proto::HeartbeatResponse resp;
  ASSERT_TRUE(service.Heartbeat(Beat(kPs, 7), &resp).ok());
  EXPECT_EQ(resp.coordinator_incarnation(), 7u);
  EXPECT_EQ(resp.timeout_ms(), 10000);
  EXPECT_EQ(StateOf(resp, kPs), proto::TaskHealth::ALIVE);
  // Not heard from yet: maybe still starting, not dead, however long it takes.
  env.Advance(absl::Minutes(5));
  service.Snapshot(&resp);
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::UNKNOWN);

  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 1), &resp).ok());
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::ALIVE);
  env.Advance(absl::Seconds(9));
  service.Snapshot(&resp);
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::ALIVE) << "9 s of silence is within the 10 s limit";
  env.Advance(absl::Seconds(2));
  service.Snapshot(&resp);
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::DEAD);
  for (const proto::TaskHealth& h : resp.tasks()) {
    if (h.task() == kChief) {
      EXPECT_EQ(h.silent_ms(), 11000);
    }
  }

  // A restart (new incarnation) is alive again.
  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 2), &resp).ok());
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::ALIVE);
}

TEST(CoordinationService, AGoodbyeIsNotADeathButAnOldIncarnationsGoodbyeIsIgnored) {
  FakeClockEnv env;
  CoordinationService service({kPs, kChief, kWorker1}, absl::Seconds(10), 7, &env);
  proto::HeartbeatResponse resp;
  ASSERT_TRUE(service.Heartbeat(Beat(kWorker1, 1), &resp).ok());
  ASSERT_TRUE(service.Heartbeat(Beat(kWorker1, 1, /*leaving=*/true), &resp).ok());
  env.Advance(absl::Minutes(1));
  service.Snapshot(&resp);
  EXPECT_EQ(StateOf(resp, kWorker1), proto::TaskHealth::LEFT);

  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 1), &resp).ok());
  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 2), &resp).ok());  // restarted
  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 1, /*leaving=*/true), &resp).ok());
  EXPECT_EQ(StateOf(resp, kChief), proto::TaskHealth::ALIVE);
}

TEST(CoordinationService, AHeartbeatFromOutsideTheClusterIsRefusedByName) {
  FakeClockEnv env;
  CoordinationService service({kPs, kChief}, absl::Seconds(10), 7, &env);
  proto::HeartbeatResponse resp;
  absl::Status s = service.Heartbeat(Beat("/job:worker/replica:0/task:9", 1), &resp);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "/job:worker/replica:0/task:9")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "cluster spec")) << s;
}

// The membership of a 1 ps + 2 worker spec, on a fake clock.
struct MembershipFixture {
  FakeClockEnv env;
  ClusterSpec spec = *ClusterSpec::Parse("ps|10.0.0.1:2222,worker|10.0.0.2:2222;10.0.0.3:2222");
  CoordinationService service{spec, absl::Seconds(10), 7, &env};
  proto::TaskHealth::State State(const std::string& task) {
    proto::HeartbeatResponse resp;
    service.Snapshot(&resp);
    return StateOf(resp, task);
  }
};

TEST(CoordinationMembership, AJoinerGetsTheNextIndexAndTheLiveClusterAndIsThenATaskLikeTheOthers) {
  MembershipFixture m;
  ClusterSpec now;
  absl::StatusOr<int> index = m.service.Join("worker", "10.0.0.9:2300", &now);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, 2);
  EXPECT_EQ(now.task_address("worker", 2).value_or(""), "10.0.0.9:2300");
  EXPECT_EQ(now.task_address("ps", 0).value_or(""), "10.0.0.1:2222");
  EXPECT_EQ(now.num_tasks("worker"), 3);
  const std::string joiner = "/job:worker/replica:0/task:2";
  EXPECT_EQ(m.State(joiner), proto::TaskHealth::ALIVE) << "alive from the join, so a silent joiner dies";
  proto::HeartbeatResponse resp;
  EXPECT_TRUE(m.service.Heartbeat(Beat(joiner, 5), &resp).ok()) << "its heartbeats are taken";
  // A second joiner gets the index after it.
  EXPECT_EQ(m.service.Join("worker", "10.0.0.9:2301", nullptr).value_or(-1), 3);
  // Silent for longer than the timeout: dead, and out of the cluster a new joiner gets.
  m.env.Advance(absl::Seconds(11));
  EXPECT_EQ(m.State(joiner), proto::TaskHealth::DEAD);
  ASSERT_TRUE(m.service.Join("worker", "10.0.0.9:2302", &now).ok());
  EXPECT_FALSE(now.HasTask("worker", 2));
  EXPECT_EQ(now.task_address("worker", 0).value_or(""), "10.0.0.2:2222") << "the spec's tasks stay";
  // Members says who joined, with addresses.
  int joined = 0;
  for (const proto::Member& member : m.service.Members()) {
    if (member.joined()) ++joined;
    if (member.task() == joiner) {
      EXPECT_EQ(member.address(), "10.0.0.9:2300");
      EXPECT_EQ(member.state(), proto::TaskHealth::DEAD);
    }
  }
  EXPECT_EQ(joined, 3);
}

TEST(CoordinationMembership, AReplacementOnTheAddressOfATaskThatIsGoneTakesItsIndex) {
  MembershipFixture m;
  ASSERT_EQ(m.service.Join("worker", "10.0.0.9:2300", nullptr).value_or(-1), 2);
  proto::HeartbeatResponse resp;
  ASSERT_TRUE(m.service.Heartbeat(Beat("/job:worker/replica:0/task:2", 1, /*leaving=*/true), &resp).ok());
  EXPECT_EQ(m.service.Join("worker", "10.0.0.9:2300", nullptr).value_or(-1), 2);
  EXPECT_EQ(m.State("/job:worker/replica:0/task:2"), proto::TaskHealth::ALIVE);
}

// ps 0 restarted: its new service knows only the spec, and refuses the
// heartbeat of a task that had joined; the task asks to rejoin with its
// address and is a joined member again, and later joiners get the indices
// after it.
TEST(CoordinationMembership, ARestartedCoordinatorTakesJoinedTasksBackWhenTheyAskToRejoin) {
  MembershipFixture before;
  ASSERT_EQ(before.service.Join("worker", "10.0.0.9:2300", nullptr).value_or(-1), 2);
  MembershipFixture after;  // the restarted coordinator
  const std::string joined = "/job:worker/replica:0/task:2";
  proto::HeartbeatResponse resp;
  EXPECT_TRUE(absl::IsInvalidArgument(after.service.Heartbeat(Beat(joined, 5), &resp)));
  ASSERT_TRUE(after.service.Rejoin(joined, "10.0.0.9:2300").ok());
  EXPECT_TRUE(after.service.Rejoin(joined, "10.0.0.9:2300").ok()) << "asking twice is harmless";
  ASSERT_TRUE(after.service.Heartbeat(Beat(joined, 5), &resp).ok());
  EXPECT_EQ(StateOf(resp, joined), proto::TaskHealth::ALIVE);
  bool listed = false;
  for (const proto::Member& member : after.service.Members()) {
    if (member.task() != joined) continue;
    listed = true;
    EXPECT_TRUE(member.joined());
    EXPECT_EQ(member.address(), "10.0.0.9:2300");
  }
  EXPECT_TRUE(listed);
  ClusterSpec now;
  EXPECT_EQ(after.service.Join("worker", "10.0.0.9:2301", &now).value_or(-1), 3);
  EXPECT_EQ(now.task_address("worker", 2).value_or(""), "10.0.0.9:2300");
  // On the address of a live task, or with a malformed name or address:
  // refused naming the culprit.
  absl::Status s = after.service.Rejoin("/job:worker/replica:0/task:8", "10.0.0.9:2300");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the address of /job:worker/replica:0/task:2, which is alive")) << s;
  s = after.service.Rejoin("/job:worker/task:x", "10.0.0.9:2310");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "'/job:worker/task:x' is not a task name")) << s;
  s = after.service.Rejoin("/job:worker/replica:0/task:9", "10.0.0.9");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the address '10.0.0.9', which is not a host:port")) << s;
}

TEST(CoordinationMembership, ABadJoinIsRefusedNamingTheCulprit) {
  MembershipFixture m;
  proto::HeartbeatResponse resp;
  ASSERT_TRUE(m.service.Heartbeat(Beat("/job:worker/replica:0/task:1", 1), &resp).ok());
  absl::StatusOr<int> taken = m.service.Join("worker", "10.0.0.3:2222", nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(taken.status())) << taken.status();
  EXPECT_TRUE(absl::StrContains(taken.status().message(),
                                "10.0.0.3:2222 is already /job:worker/replica:0/task:1, which is alive"))
      << taken.status();
  absl::StatusOr<int> job = m.service.Join("work er", "10.0.0.9:1", nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(job.status())) << job.status();
  EXPECT_TRUE(absl::StrContains(job.status().message(), "'work er' is not a job name")) << job.status();
  for (const char* address : {"10.0.0.9", "10.0.0.9:0", "10.0.0.9:99999", ""}) {
    absl::StatusOr<int> bad = m.service.Join("worker", address, nullptr);
    EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << address << ": " << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), absl::StrCat("'", address, "'"))) << bad.status();
  }
}

proto::GroupRendezvousRequest Ask(int rank, int64_t last_generation, uint64_t nonce, int size = 3) {
  proto::GroupRendezvousRequest r;
  r.set_job("worker");
  r.set_group_size(size);
  r.set_rank(rank);
  r.set_last_generation(last_generation);
  r.set_nonce(nonce);
  return r;
}

TEST(CoordinationGroupRendezvous, TheRoundEndsWhenEveryRankAskedAndEachLearnsTheSameGeneration) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1, "/job:worker/replica:0/task:2"}, absl::Seconds(10), 7, &env);
  proto::GroupRendezvousResponse resp;
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 0, 100), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{1, 2}));
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 0, 102), &resp).ok());
  EXPECT_FALSE(resp.done());
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 0, 100), &resp).ok());  // polling
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{1}));
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 0, 101), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 1);
  EXPECT_EQ(resp.root(), 0) << "a fresh group's state comes from rank 0";
  for (int r : {0, 2}) {
    ASSERT_TRUE(service.GroupRendezvous(Ask(r, 0, 100 + static_cast<uint64_t>(r)), &resp).ok());
    EXPECT_TRUE(resp.done()) << "rank " << r << " polls the round it took part in";
    EXPECT_EQ(resp.generation(), 1);
  }
}

TEST(CoordinationGroupRendezvous, AFreshJobNeedsNoRoundButARestartedRankJoinsOne) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1, "/job:worker/replica:0/task:2"}, absl::Seconds(10), 7, &env);
  proto::GroupRendezvousResponse resp;
  for (int r = 0; r < 3; ++r) {
    proto::GroupRendezvousRequest probe = Ask(r, 0, 50 + static_cast<uint64_t>(r));
    probe.set_probe(true);
    ASSERT_TRUE(service.GroupRendezvous(probe, &resp).ok());
    EXPECT_TRUE(resp.done()) << "rank " << r << " of a fresh job starts at once";
    EXPECT_EQ(resp.generation(), 1);
  }
  // Rank 2's second process probes: a restart, so it waits for the others.
  proto::GroupRendezvousRequest again = Ask(2, 0, 99);
  again.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(again, &resp).ok());
  EXPECT_FALSE(resp.done());
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 60), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 1, 61), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 2);
  EXPECT_EQ(resp.root(), 0) << "rank 0 kept running; rank 2 has no state";
  ASSERT_TRUE(service.GroupRendezvous(again, &resp).ok());
  EXPECT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 2);
}

// Rank 2 died before the group's first collective: rank 0's first run
// failed on it and rank 0 waits to rebuild. Rank 1, slower, probes only now:
// it starts in generation 1 too (its run there fails on rank 2, naming it),
// instead of joining a round that cannot finish without rank 2.
TEST(CoordinationGroupRendezvous, AFirstProbeAfterAFreshRanksFailureStartsInGenerationOne) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1, "/job:worker/replica:0/task:2"}, absl::Seconds(10), 7, &env);
  proto::GroupRendezvousResponse resp;
  proto::GroupRendezvousRequest probe0 = Ask(0, 0, 50);
  probe0.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(probe0, &resp).ok());
  ASSERT_TRUE(resp.done());
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 60), &resp).ok());
  EXPECT_FALSE(resp.done()) << "rank 0 waits to rebuild";
  proto::GroupRendezvousRequest probe1 = Ask(1, 0, 51);
  probe1.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(probe1, &resp).ok());
  EXPECT_TRUE(resp.done()) << "rank 1's first probe does not wait in rank 0's round";
  EXPECT_EQ(resp.generation(), 1);
  // Its run in generation 1 failed: it joins the round, which waits for rank 2.
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 1, 61), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{2}));
  // A second probe of rank 1 is a restart: it joins the round.
  proto::GroupRendezvousRequest again = Ask(1, 0, 99);
  again.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(again, &resp).ok());
  EXPECT_FALSE(resp.done());
}

TEST(CoordinationGroupRendezvous, AfterARestartTheStateComesFromTheLowestSurvivor) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1, "/job:worker/replica:0/task:2"}, absl::Seconds(10), 7, &env);
  proto::GroupRendezvousResponse resp;
  // Rank 0 restarted (no state); ranks 1 and 2 were in generation 4. A
  // restarted coordinator knows nothing of generation 4: the ranks carry it.
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 0, 1), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 4, 2), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 4, 3), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 5);
  EXPECT_EQ(resp.root(), 1);
  proto::GroupRendezvousRequest query = Ask(2, 5, 0);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(resp.waiting_size(), 0) << "no round under way";
  // A later round: an ask with an old nonce does not complete it.
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 5, 11), &resp).ok());
  EXPECT_FALSE(resp.done());
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(std::vector<int>(resp.waiting().begin(), resp.waiting().end()), (std::vector<int>{0}))
      << "rank 2 learns that rank 0 has left generation 5";
  EXPECT_FALSE(resp.done());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 4, 3), &resp).ok());
  EXPECT_TRUE(resp.done()) << "rank 1 still polls the round it completed";
  EXPECT_EQ(resp.generation(), 5);
}

TEST(CoordinationGroupRendezvous, ARankThatDiedWhileWaitingIsNotCountedAndABadRankIsRefused) {
  FakeClockEnv env;
  const std::string w2 = "/job:worker/replica:0/task:2";
  CoordinationService service({kChief, kWorker1, w2}, absl::Seconds(10), 7, &env);
  proto::HeartbeatResponse beat;
  ASSERT_TRUE(service.Heartbeat(Beat(w2, 5), &beat).ok());
  proto::GroupRendezvousResponse resp;
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 3, 1), &resp).ok());
  env.Advance(absl::Seconds(11));  // rank 2 is declared dead
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 3, 2), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 3, 3), &resp).ok());
  EXPECT_FALSE(resp.done()) << "a dead rank's ask does not complete the round";
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{2}));
  absl::Status bad = service.GroupRendezvous(Ask(3, 0, 4), &resp);
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_TRUE(absl::StrContains(bad.message(), "rank 3 is not in a group of 3")) << bad.message();
}

// A process set's group (tasks 0 and 2 of 3) is rebuilt on its own: its
// round ends when its two members asked, apart from the whole group's, and
// a dead member (task 2, its rank 1) is not counted.
TEST(CoordinationGroupRendezvous, AProcessSetIsItsOwnGroup) {
  FakeClockEnv env;
  const std::string w2 = "/job:worker/replica:0/task:2";
  CoordinationService service({kChief, kWorker1, w2}, absl::Seconds(10), 7, &env);
  auto set_ask = [](int rank, uint64_t nonce) {
    proto::GroupRendezvousRequest r = Ask(rank, 1, nonce, 2);
    r.add_members(0);
    r.add_members(2);
    return r;
  };
  proto::GroupRendezvousResponse resp;
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 10), &resp).ok());  // the whole group's round
  ASSERT_TRUE(service.GroupRendezvous(set_ask(0, 20), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{1}));
  ASSERT_TRUE(service.GroupRendezvous(set_ask(1, 21), &resp).ok());
  ASSERT_TRUE(resp.done()) << "the set's two members asked";
  EXPECT_EQ(resp.generation(), 2);
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 10), &resp).ok());
  EXPECT_FALSE(resp.done()) << "the whole group still waits for tasks 1 and 2";
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{1, 2}));
  // Task 2 (the set's rank 1) asks again and dies: not counted.
  proto::HeartbeatResponse beat;
  ASSERT_TRUE(service.Heartbeat(Beat(w2, 5), &beat).ok());
  ASSERT_TRUE(service.GroupRendezvous(set_ask(1, 30), &resp).ok());
  env.Advance(absl::Seconds(11));
  ASSERT_TRUE(service.GroupRendezvous(set_ask(0, 31), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(std::vector<int>(resp.missing().begin(), resp.missing().end()), (std::vector<int>{1}));
  proto::GroupRendezvousRequest bad = set_ask(0, 40);
  bad.add_members(1);
  EXPECT_TRUE(absl::IsInvalidArgument(service.GroupRendezvous(bad, &resp)));
}

std::vector<int> Ints(const google::protobuf::RepeatedField<int32_t>& r) { return {r.begin(), r.end()}; }

// A group across jobs (group_tasks: worker 1, ps 0, worker 0 in rank
// order) is known by its task names, however a member spells them: its
// members ask from two jobs and meet in one round; a restarted member joins
// the survivors in a new generation whose state comes from the lowest of
// them; a dead member is not counted; malformed lists are refused.
TEST(CoordinationGroupRendezvous, AGroupAcrossJobsIsKnownByItsTasks) {
  FakeClockEnv env;
  CoordinationService service({kPs, kChief, kWorker1}, absl::Seconds(10), 7, &env);
  auto ask = [](const std::string& job, int rank, int64_t generation, uint64_t nonce, bool short_names) {
    proto::GroupRendezvousRequest r = Ask(rank, generation, nonce);
    r.set_job(job);
    for (const char* t : {"/job:worker/task:1", "/job:ps/task:0", "/job:worker/task:0"}) {
      r.add_tasks(short_names ? t : absl::StrReplaceAll(t, {{"/task:", "/replica:0/task:"}}));
    }
    return r;
  };
  proto::GroupRendezvousResponse resp;
  for (int rank = 0; rank < 3; ++rank) {  // a fresh group: generation 1 at once
    proto::GroupRendezvousRequest probe = ask(rank == 1 ? "ps" : "worker", rank, 0, 10 + rank, rank == 1);
    probe.set_probe(true);
    ASSERT_TRUE(service.GroupRendezvous(probe, &resp).ok());
    EXPECT_TRUE(resp.done());
    EXPECT_EQ(resp.generation(), 1);
  }
  // Rank 0 restarted: its new process's probe joins a round.
  proto::GroupRendezvousRequest restarted = ask("worker", 0, 0, 20, false);
  restarted.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(restarted, &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{1, 2}));
  ASSERT_TRUE(service.GroupRendezvous(ask("ps", 1, 1, 21, true), &resp).ok());
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{2})) << "the ps's ask counts in the same round";
  proto::GroupRendezvousRequest query = ask("worker", 2, 1, 0, false);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(Ints(resp.waiting()), (std::vector<int>{0, 1})) << "rank 2 learns that its peers left generation 1";
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 30, 2), &resp).ok());
  EXPECT_FALSE(resp.done()) << "the worker job's own group of 2 is another group";
  ASSERT_TRUE(service.GroupRendezvous(ask("worker", 2, 1, 22, false), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 2);
  EXPECT_EQ(resp.root(), 1) << "the ps is the lowest rank that kept its state";
  ASSERT_TRUE(service.GroupRendezvous(restarted, &resp).ok());
  EXPECT_TRUE(resp.done() && resp.generation() == 2) << "the restarted rank polls the round it took part in";
  // Rank 0 (worker 1) asks again and dies: not counted.
  proto::HeartbeatResponse beat;
  ASSERT_TRUE(service.Heartbeat(Beat(kWorker1, 5), &beat).ok());
  ASSERT_TRUE(service.GroupRendezvous(ask("worker", 0, 2, 40, false), &resp).ok());
  env.Advance(absl::Seconds(11));
  ASSERT_TRUE(service.GroupRendezvous(ask("ps", 1, 2, 41, true), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(ask("worker", 2, 2, 42, true), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{0}));
  // Malformed: not a task's name, a task twice, members beside tasks.
  proto::GroupRendezvousRequest bad = ask("ps", 1, 0, 50, true);
  bad.set_tasks(0, "ps0");
  EXPECT_TRUE(absl::StrContains(service.GroupRendezvous(bad, &resp).message(), "'ps0', which is not a task name"));
  bad.set_tasks(0, "/job:ps/replica:0/task:0");
  EXPECT_TRUE(absl::StrContains(service.GroupRendezvous(bad, &resp).message(), "twice"));
  bad = ask("ps", 1, 0, 51, true);
  bad.add_members(0);
  EXPECT_TRUE(absl::IsInvalidArgument(service.GroupRendezvous(bad, &resp)));
}

TEST(CoordinationGroupRendezvous, AnElasticGroupTakesInAJoinerAndGoesOnWithoutTheDead) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1}, absl::Seconds(10), 7, &env);
  proto::GroupRendezvousResponse resp;
  // A fresh job: both spec workers (not heard from yet) are waited for.
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 0, 11, 0), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{0}));
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 0, 10, 0), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 1);
  EXPECT_EQ(Ints(resp.members()), (std::vector<int>{0, 1}));
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 0, 11, 0), &resp).ok());
  EXPECT_TRUE(resp.done()) << "task 1 polls the round it took part in";
  // A worker joins (task 2) and asks; the others learn it at their next query.
  ASSERT_TRUE(service.Join("worker", "127.0.0.1:7002", nullptr).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 0, 20, 0), &resp).ok());
  EXPECT_FALSE(resp.done());
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{0, 1}));
  proto::GroupRendezvousRequest query = Ask(0, 1, 0, 0);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(Ints(resp.pending()), (std::vector<int>{2})) << "task 2 waits to enter the group";
  EXPECT_TRUE(resp.waiting().empty()) << "nobody left generation 1: its runs go on";
  EXPECT_TRUE(resp.gone().empty());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 1, 12, 0), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 1, 13, 0), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 2);
  EXPECT_EQ(Ints(resp.members()), (std::vector<int>{0, 1, 2})) << "the joiner comes after the oldest";
  // Task 0 dies (it heartbeated once, then fell silent): task 1 and task 2
  // rebuild without it once it is declared dead, and the state now comes
  // from task 1, the lowest of the oldest, which is rank 0.
  proto::HeartbeatResponse beat;
  ASSERT_TRUE(service.Heartbeat(Beat(kChief, 3), &beat).ok());
  env.Advance(absl::Seconds(5));
  ASSERT_TRUE(service.Heartbeat(Beat(kWorker1, 3), &beat).ok());
  ASSERT_TRUE(service.Heartbeat(Beat("/job:worker/replica:0/task:2", 3), &beat).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 2, 21, 0), &resp).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(1, 2, 14, 0), &resp).ok());
  EXPECT_FALSE(resp.done()) << "task 0 is not declared dead yet";
  EXPECT_EQ(Ints(resp.missing()), (std::vector<int>{0}));
  env.Advance(absl::Seconds(6));
  ASSERT_TRUE(service.Heartbeat(Beat(kWorker1, 3), &beat).ok());
  ASSERT_TRUE(service.Heartbeat(Beat("/job:worker/replica:0/task:2", 3), &beat).ok());
  query = Ask(1, 2, 0, 0);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(Ints(resp.gone()), (std::vector<int>{0}));
  EXPECT_EQ(Ints(resp.waiting()), (std::vector<int>{1, 2})) << "both left generation 2";
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 2, 21, 0), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 3);
  EXPECT_EQ(Ints(resp.members()), (std::vector<int>{1, 2}));
  // A task the service does not know is refused by name.
  absl::Status bad = service.GroupRendezvous(Ask(7, 0, 30, 0), &resp);
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_TRUE(absl::StrContains(bad.message(), "/job:worker/replica:0/task:7 is not a task of the job"))
      << bad.message();
  // The elastic group takes no member list: the coordinator decides it.
  proto::GroupRendezvousRequest listed = Ask(1, 3, 31, 0);
  listed.add_members(1);
  EXPECT_TRUE(absl::IsInvalidArgument(service.GroupRendezvous(listed, &resp)));
}

TEST(CoordinationGroupRendezvous, ARestartedCoordinatorResumesTheElasticGroupAtTheGenerationItsRanksSay) {
  FakeClockEnv env;
  const std::string w2 = "/job:worker/replica:0/task:2";
  // A coordinator that restarted while tasks 0 and 1 were in generation 3.
  CoordinationService service({kChief, kWorker1}, absl::Seconds(10), 8, &env);
  proto::HeartbeatResponse beat;
  for (const std::string& t : {kChief, kWorker1}) ASSERT_TRUE(service.Heartbeat(Beat(t, 3), &beat).ok());
  proto::GroupRendezvousResponse resp;
  proto::GroupRendezvousRequest query = Ask(0, 3, 0, 0);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_TRUE(resp.pending().empty()) << "nobody waits to enter";
  query.set_rank(1);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  // A worker joins through the restarted coordinator: a newcomer, not a member.
  ASSERT_TRUE(service.Join("worker", "127.0.0.1:7002", nullptr).ok());
  ASSERT_TRUE(service.Heartbeat(Beat(w2, 1), &beat).ok());
  ASSERT_TRUE(service.GroupRendezvous(Ask(2, 0, 20, 0), &resp).ok());
  EXPECT_FALSE(resp.done());
  query.set_rank(0);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(Ints(resp.pending()), (std::vector<int>{2})) << "only the joiner is new to generation 3";
  // Task 1 dies before the round: the members heard since the restart know it is gone.
  env.Advance(absl::Seconds(11));
  for (const std::string& t : {kChief, w2}) ASSERT_TRUE(service.Heartbeat(Beat(t, 3), &beat).ok());
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  EXPECT_EQ(Ints(resp.gone()), (std::vector<int>{1}));
  // The round of task 0 (generation 3) and the joiner (none) is in generation 4, never 1 again.
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 3, 10, 0), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 4);
  EXPECT_EQ(Ints(resp.members()), (std::vector<int>{0, 2}));
}

TEST(CoordinationGroupRendezvous, ARestartedCoordinatorMakesAFixedGroupsRestartedRankJoinARound) {
  FakeClockEnv env;
  CoordinationService service({kChief, kWorker1}, absl::Seconds(10), 8, &env);
  proto::GroupRendezvousResponse resp;
  // Rank 0 survived in generation 2 and says so; rank 1 restarted and probes.
  proto::GroupRendezvousRequest query = Ask(0, 2, 0, 2);
  query.set_query(true);
  ASSERT_TRUE(service.GroupRendezvous(query, &resp).ok());
  proto::GroupRendezvousRequest probe = Ask(1, 0, 40, 2);
  probe.set_probe(true);
  ASSERT_TRUE(service.GroupRendezvous(probe, &resp).ok());
  EXPECT_FALSE(resp.done()) << "generation 1 alone would split it from rank 0";
  ASSERT_TRUE(service.GroupRendezvous(Ask(0, 2, 41, 2), &resp).ok());
  ASSERT_TRUE(resp.done());
  EXPECT_EQ(resp.generation(), 3);
  EXPECT_EQ(resp.root(), 0);
  // A fresh job's probes and asks in generation 1 are no restart.
  CoordinationService fresh({kChief, kWorker1}, absl::Seconds(10), 9, &env);
  for (int r = 0; r < 2; ++r) {
    proto::GroupRendezvousRequest p = Ask(r, 0, 50 + static_cast<uint64_t>(r), 2);
    p.set_probe(true);
    ASSERT_TRUE(fresh.GroupRendezvous(p, &resp).ok());
    EXPECT_TRUE(resp.done());
    EXPECT_EQ(resp.generation(), 1);
  }
  proto::GroupRendezvousRequest q1 = Ask(0, 1, 0, 2);
  q1.set_query(true);
  ASSERT_TRUE(fresh.GroupRendezvous(q1, &resp).ok());
  EXPECT_TRUE(resp.waiting().empty());
}

}  // namespace
}  // namespace distflow::coordination_test
