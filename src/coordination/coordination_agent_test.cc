// Failure detection from an agent's side: the coordinator's own agent on a
// fake clock (deaths reported once, a ps's orphan rule, a pause of the
// coordinator's process), a task's agent paused while its coordinator went
// away, and a real cluster in this process noticing a task that went silent.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "base/wait_until.h"
#include "coordination/coordination.h"
#include "coordination/coordination_test_util.h"
#include "distflow/server.h"
#include "gtest/gtest.h"
#include "rpc/worker_cache.h"
#include "server/grpc_server.h"

namespace distflow::coordination_test {
namespace {

TEST(CoordinationAgent, ReportsEachDeathOnceWithAMessageNamingTheTask) {
  AgentFixture f;
  f.Beat(kChief);
  f.Beat(kWorker1);
  f.agent.Tick();
  EXPECT_TRUE(f.deaths.empty());
  EXPECT_TRUE(f.agent.DeadTasks().empty());
  f.env.Advance(absl::Seconds(11));
  f.Beat(kChief);
  f.agent.Tick();
  ASSERT_EQ(f.deaths.size(), 1u);
  EXPECT_EQ(f.deaths[0].first, kWorker1);
  EXPECT_TRUE(absl::StrContains(f.deaths[0].second, kWorker1)) << f.deaths[0].second;
  EXPECT_TRUE(absl::StrContains(f.deaths[0].second, "no heartbeat for 11.0 s")) << f.deaths[0].second;
  EXPECT_TRUE(absl::StrContains(f.deaths[0].second, "--heartbeat_timeout_secs")) << f.deaths[0].second;
  EXPECT_EQ(f.agent.DeadTasks(), std::vector<std::string>{kWorker1});
  f.agent.Tick();
  EXPECT_EQ(f.deaths.size(), 1u) << "a death is reported once";
  // It comes back, then dies again: reported again.
  f.Beat(kWorker1, 2);
  f.agent.Tick();
  EXPECT_TRUE(f.agent.DeadTasks().empty());
  f.env.Advance(absl::Seconds(11));
  f.Beat(kChief);
  f.agent.Tick();
  EXPECT_EQ(f.deaths.size(), 2u);
}

TEST(CoordinationAgent, AParameterServerGivesUpOnlyAfterTheChiefStayedDeadForTheGrace) {
  AgentFixture f;
  const absl::Duration grace = absl::Seconds(30);
  f.Beat(kChief);
  f.Beat(kWorker1);
  f.agent.Tick();
  EXPECT_EQ(OrphanReason(f.agent, kChief, grace), "");
  for (int i = 0; i < 20; ++i) {  // 20 s: the chief silent, worker 1 alive
    f.env.Advance(absl::Seconds(1));
    f.Beat(kWorker1);
    f.agent.Tick();
  }
  EXPECT_EQ(f.agent.DeadTasks(), std::vector<std::string>{kChief});
  EXPECT_EQ(OrphanReason(f.agent, kChief, grace), "") << "dead 20 s, within 10 s + 30 s";
  for (int i = 0; i < 21; ++i) {
    f.env.Advance(absl::Seconds(1));
    f.Beat(kWorker1);
    f.agent.Tick();
  }
  std::string reason = OrphanReason(f.agent, kChief, grace);
  EXPECT_TRUE(absl::StrContains(reason, "the chief " + kChief + " died")) << reason;
  // A chief restarted in time (a new incarnation) keeps the job.
  f.Beat(kChief, 2);
  f.agent.Tick();
  EXPECT_EQ(OrphanReason(f.agent, kChief, grace), "");
}

TEST(CoordinationAgent, AParameterServerGivesUpWhenEveryWorkerIsDeadOrLeft) {
  AgentFixture f;
  const absl::Duration grace = absl::Seconds(5);
  f.Beat(kChief);
  f.Beat(kWorker1);
  f.Beat(kChief, 1, /*leaving=*/true);  // the chief finished cleanly (without ending the cluster)
  f.agent.Tick();
  f.env.Advance(absl::Seconds(20));
  f.agent.Tick();
  EXPECT_EQ(f.agent.DeadTasks(), std::vector<std::string>{kWorker1});
  std::string reason = OrphanReason(f.agent, kChief, grace);
  EXPECT_TRUE(absl::StrContains(reason, "every worker is gone (1 died, 1 finished)")) << reason;
}

TEST(CoordinationAgent, WorkersThatAllLeftCleanlyDoNotEndTheJob) {
  AgentFixture f;
  f.Beat(kChief);
  f.Beat(kWorker1);
  f.Beat(kChief, 1, true);
  f.Beat(kWorker1, 1, true);
  f.env.Advance(absl::Minutes(10));
  f.agent.Tick();
  EXPECT_EQ(OrphanReason(f.agent, kChief, absl::Seconds(1)), "");
}

// A coordinator that was itself paused (SIGSTOP, swap, a long stall) heard
// nobody meanwhile: on resume, every task's heartbeat looks late, but that
// gap in its own loop is no evidence. Turn() stands for the agent's thread.
TEST(CoordinationAgent, ACoordinatorThatWasPausedDeclaresNoOneDeadOnResume) {
  AgentFixture f;
  f.Beat(kChief);
  f.Beat(kWorker1);
  f.agent.Turn();
  for (int i = 0; i < 3; ++i) {  // the loop runs every second; both tasks beat
    f.env.Advance(absl::Seconds(1));
    f.Beat(kChief);
    f.Beat(kWorker1);
    f.agent.Turn();
  }
  // The coordinator's process stops for 30 s, three times the timeout: its
  // loop does not run and it hears nobody. On resume, a heartbeat that
  // waited in the socket meanwhile is served before the loop runs again.
  f.env.Advance(absl::Seconds(30));
  f.Beat(kChief);
  proto::HeartbeatResponse resp;
  f.service.Snapshot(&resp);
  EXPECT_EQ(StateOf(resp, kWorker1), proto::TaskHealth::ALIVE) << "silent only while the coordinator was paused";
  f.agent.Turn();
  EXPECT_TRUE(f.deaths.empty()) << f.deaths[0].second;
  EXPECT_TRUE(f.agent.DeadTasks().empty());
  // From the resume on, silence counts again: worker 1 beats no more and is
  // declared dead a timeout later, its silence measured from the resume.
  for (int i = 0; i < 11; ++i) {
    f.env.Advance(absl::Seconds(1));
    f.Beat(kChief);
    f.agent.Turn();
  }
  ASSERT_EQ(f.deaths.size(), 1u);
  EXPECT_EQ(f.deaths[0].first, kWorker1);
  EXPECT_TRUE(absl::StrContains(f.deaths[0].second, "no heartbeat for 11.0 s")) << f.deaths[0].second;
  EXPECT_EQ(f.agent.DeadTasks(), std::vector<std::string>{kWorker1});
}

// A task's own pause is no evidence against the coordinator either: a
// worker agent (on a fake clock) that reached a real coordinator, then was
// paused for 30 s while the coordinator went away, does not declare it dead
// at its first failed heartbeat after the resume, only once it has stayed
// unreachable for the timeout from the resume.
TEST(CoordinationAgent, ATaskThatWasPausedDoesNotDeclareTheCoordinatorDeadOnResume) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.heartbeat_interval_ms = 1000;
  options.heartbeat_timeout_ms = 600000;  // the server's own verdicts play no part here
  options.orphan_grace_ms = -1;
  options.bulk_transfer = false;
  absl::StatusOr<std::unique_ptr<Server>> ps = Server::Create(*spec, "ps", 0, options);
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE((*ps)->Start().ok());
  FakeClockEnv env;
  WorkerCache peers((*ps)->cluster(), "");
  CoordinationAgent agent(kWorker1, 1, kPs, CoordinationOptions{absl::Seconds(1), absl::Seconds(10), ""}, &peers,
                          nullptr, &env);
  std::vector<std::string> deaths;
  agent.SetCallbacks([&](const std::string& task, const absl::Status&) { deaths.push_back(task); }, nullptr);
  agent.Turn();
  ASSERT_FALSE(agent.View().empty()) << "the coordinator never answered";
  (*ps)->Stop();
  env.Advance(absl::Seconds(30));  // this task's process was stopped meanwhile
  agent.Turn();                    // its first heartbeat after the resume fails
  EXPECT_TRUE(deaths.empty()) << "the coordinator was declared dead for this task's own pause";
  for (int i = 0; i < 11 && deaths.empty(); ++i) {
    env.Advance(absl::Seconds(1));
    agent.Turn();
  }
  EXPECT_EQ(deaths, std::vector<std::string>{kPs}) << "unreachable for 11 s after the resume";
}

TEST(CoordinationCluster, ASilentTaskIsDeclaredDeadEverywhere) {
  auto spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 400;
  options.orphan_grace_ms = -1;
  options.bulk_transfer = false;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server& ps = *(*servers)[0];
  Server& chief = *(*servers)[1];
  Server& w1 = *(*servers)[2];
  ASSERT_EQ(w1.task_name(), kWorker1);
  auto wait_for = [](const std::function<bool()>& cond) { return WaitUntil(cond, absl::Seconds(20)); };
  // Everyone heard from, nobody dead.
  ASSERT_TRUE(wait_for([&] { return chief.impl()->coordination()->View().size() == 3; }));
  EXPECT_TRUE(ps.DeadTasks().empty());
  // Worker 1's heartbeats stop (as when its process hangs): the coordinator
  // declares it dead and the chief learns it from its next heartbeat.
  w1.impl()->coordination()->Stop(/*leaving=*/false);
  const absl::Time silenced = absl::Now();
  ASSERT_TRUE(wait_for([&] { return chief.DeadTasks() == std::vector<std::string>{kWorker1}; }))
      << "the chief never learned that worker 1 is dead";
  EXPECT_TRUE(wait_for([&] { return ps.DeadTasks() == std::vector<std::string>{kWorker1}; }));
  EXPECT_GE(absl::Now() - silenced, absl::Milliseconds(400)) << "declared dead before the timeout";
  // The ps gives up only with a grace set; here it stays.
  EXPECT_TRUE(ps.exit_status().ok());
}

}  // namespace
}  // namespace distflow::coordination_test
