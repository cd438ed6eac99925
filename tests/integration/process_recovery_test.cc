// process_test: the book's program (mnist_distributed) in real processes
// whose tasks are killed, stopped, restarted or started out of order, and
// the flags that configure its recovery and failure detection.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "process_test_util.h"

namespace distflow {
namespace process_test {
namespace {

TEST(Recovery, AChiefKilledWithSigkillResumesFromItsLastCheckpoint) {
  BookCluster c("chief_kill");
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(4000);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(chief.pid, SIGKILL);
  EXPECT_EQ(Wait(chief, 10), 128 + SIGKILL);
  const int64_t last = NewestCheckpointStep(c.logdir);
  Proc again = Spawn(c.Args("worker", 0, 4000));
  EXPECT_EQ(Wait(again, 180), 0) << Output(again);
  const std::string out = Output(again);
  EXPECT_NE(out.find("restored"), std::string::npos) << out;
  // Back to the newest checkpoint at the kill (or a newer one), never to 0.
  EXPECT_GE(RestoredStep(out), last) << out;
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);  // the book's ps: join() returned
}

TEST(Recovery, APsKilledAndRestartedIsRecoveredFromTheLastCheckpoint) {
  BookCluster c("ps_kill");
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(3000);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(ps.pid, SIGKILL);
  EXPECT_EQ(Wait(ps, 10), 128 + SIGKILL);
  Proc ps_again = Spawn(c.Args("ps", 0, 0));  // same address
  EXPECT_EQ(Wait(chief, 240), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps_again, 60), 0) << Output(ps_again);
  const std::string out = Output(chief);
  EXPECT_NE(out.find("recovered"), std::string::npos) << out;
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
}

TEST(Recovery, APsKilledAndRestartedRepeatedlyLeavesNoWorkerBehind) {
  // 1 ps + 3 workers (the README's job, softmax). The ps is SIGKILLed and
  // restarted on its address four times: at once, after 1 s, after longer
  // than the heartbeat limit (the ps is the coordinator, so every task
  // declares it dead meanwhile), and at once again. Before, a worker could
  // wait forever in its recovery (a RegisterGraph to the ps without a
  // deadline, under the lock its session's Close takes) and exit 1 once the
  // chief ended the cluster.
  BookCluster c("ps_kill_3w", 3);
  c.extra = {"--heartbeat_timeout_secs=2"};
  Proc ps = Spawn(c.Args("ps", 0, 0));
  Proc w2 = Spawn(c.Args("worker", 2, 4000));
  Proc w1 = Spawn(c.Args("worker", 1, 4000));
  Proc chief = Spawn(c.Args("worker", 0, 4000));
  const int down_ms[] = {0, 1000, 3000, 0};
  for (int round = 0; round < 4; ++round) {
    // A checkpoint newer than the last restore: everyone trains again.
    const int64_t after = NewestCheckpointStep(c.logdir) + 150;
    ASSERT_TRUE(WaitForCheckpoint(c.logdir, after, 120)) << "round " << round << "\n" << Output(chief);
    kill(ps.pid, SIGKILL);
    ASSERT_EQ(Wait(ps, 10), 128 + SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(down_ms[round]));
    ps = Spawn(c.Args("ps", 0, 0));  // same address
  }
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(w2, 60), 0) << Output(w2);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);
  const std::string out = Output(chief);
  // The chief restored the model on every new ps.
  EXPECT_GE(Count(out, "Restored the model from"), 4) << out;
  EXPECT_NE(out.find("All 3 workers are done"), std::string::npos) << out;
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  for (const Proc* w : {&w1, &w2}) {
    EXPECT_GE(Count(Output(*w), "recreating the session"), 1) << Output(*w);
  }
}

TEST(Recovery, ANonChiefKilledInAsyncTrainingLeavesTheOthersToFinish) {
  BookCluster c("worker_kill");
  c.wait_for_workers_secs = 5;  // the chief waits this long for the worker that died
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(3000);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(w1.pid, SIGKILL);
  EXPECT_EQ(Wait(w1, 10), 128 + SIGKILL);
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  const std::string out = Output(chief);
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  // The chief says how many workers finished, not that all did.
  EXPECT_NE(out.find("1 of 2 workers reported done"), std::string::npos) << out;
  // Before, this ps hung on shutdown: a RecvTensor of the dead worker's
  // last step waited forever and gRPC's shutdown waited for it.
  EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
}

TEST(Recovery, SyncTrainingWithABackupWorkerSurvivesLosingAWorker) {
  // 1 ps + 3 workers, each step averaging 2 workers' gradients.
  BookCluster c("sync_kill", 3);
  c.wait_for_workers_secs = 5;
  c.extra = {"--sync_replicas", "--replicas_to_aggregate=2", "--sync_step_timeout_secs=60"};
  Proc ps = Spawn(c.Args("ps", 0, 0));
  Proc w2 = Spawn(c.Args("worker", 2, 1500));
  Proc w1 = Spawn(c.Args("worker", 1, 1500));
  Proc chief = Spawn(c.Args("worker", 0, 1500));
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(w2.pid, SIGKILL);
  EXPECT_EQ(Wait(w2, 10), 128 + SIGKILL);
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
  const std::string out = Output(chief);
  EXPECT_NE(out.find("training synchronously (2 of 3 workers per step)"), std::string::npos) << out;
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("2 of 3 workers reported done"), std::string::npos) << out;
  // Every global step was one synchronous update applied by the chief.
  size_t at = out.find(" steps applied, ");
  ASSERT_NE(at, std::string::npos) << out;
  size_t begin = out.rfind(' ', at - 1) + 1;
  EXPECT_GE(std::stoll(out.substr(begin, at - begin)), 1400) << out;
  EXPECT_EQ(NewestCheckpointStep(c.logdir), 1500);
}

TEST(Recovery, APsWhoseWorkersWereKilledStillStopsOnSigterm) {
  // Before, a ps that had run steps for workers that then died hung on
  // SIGTERM: RecvTensor calls of their last steps waited forever and gRPC's
  // shutdown waited for them.
  BookCluster c("both_workers_killed");
  Proc ps = Spawn({DISTFLOW_SERVER_BIN, "--cluster_spec=" + c.spec, "--job_name=ps", "--task_index=0"});
  Proc w1 = Spawn(c.Args("worker", 1, 100000));
  Proc chief = Spawn(c.Args("worker", 0, 100000));
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(w1.pid, SIGKILL);
  kill(chief.pid, SIGKILL);
  EXPECT_EQ(Wait(w1, 10), 128 + SIGKILL);
  EXPECT_EQ(Wait(chief, 10), 128 + SIGKILL);
  kill(ps.pid, SIGTERM);
  EXPECT_EQ(Wait(ps, 10), 0) << Output(ps);
  EXPECT_NE(Output(ps).find("Server stopped"), std::string::npos) << Output(ps);
}

// "declared dead" lines name tasks in full.
const char kWorker1[] = "/job:worker/replica:0/task:1";
const char kChiefTask[] = "/job:worker/replica:0/task:0";

TEST(FailureDetection, AWorkerThatHangsIsDeclaredDeadAndTheChiefDoesNotWaitForIt) {
  BookCluster c("hung_worker");
  c.wait_for_workers_secs = 300;  // what the chief would wait without failure detection
  c.extra = {"--heartbeat_timeout_secs=3"};
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(1500);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  // Worker 1 trains (so the coordinator has heard from it: its heartbeats
  // begin when its server starts) before it goes silent; the chief alone
  // can reach step 100 before a slow worker 1 is up.
  ASSERT_TRUE(WaitForOutput(w1, "Worker 1: model is ready", 120)) << Output(w1);
  ASSERT_TRUE(StopProcess(w1)) << "worker 1 did not stop";  // alive to the kernel, silent to the cluster
  EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
  const std::string out = Output(chief);
  EXPECT_NE(out.find(absl::StrCat("1 of 2 workers reported done; ", kWorker1, " declared dead")), std::string::npos)
      << out;
  EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
  EXPECT_NE(Output(ps).find(absl::StrCat(kWorker1, " is declared dead")), std::string::npos) << Output(ps);
  kill(w1.pid, SIGKILL);
  EXPECT_EQ(Wait(w1, 10), 128 + SIGKILL);
}

TEST(FailureDetection, APsGivesUpWhenItsChiefDiedAndDidNotComeBack) {
  BookCluster c("chief_gone");
  c.extra = {"--heartbeat_timeout_secs=2", "--orphan_grace_secs=2"};
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(100000);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  kill(chief.pid, SIGKILL);
  EXPECT_EQ(Wait(chief, 10), 128 + SIGKILL);
  // Declared dead after 2 s, given 2 s more to come back: the ps ends the
  // job, non-zero, saying why.
  EXPECT_EQ(Wait(ps, 30), 1) << Output(ps);
  const std::string ps_out = Output(ps);
  EXPECT_NE(ps_out.find(absl::StrCat("gives up on its job: the chief ", kChiefTask, " died")), std::string::npos)
      << ps_out;
  // The other worker is told why and stops: no false success, no hang.
  EXPECT_EQ(Wait(w1, 60), 1) << Output(w1);
  EXPECT_NE(Output(w1).find(absl::StrCat("the chief ", kChiefTask, " died")), std::string::npos) << Output(w1);
}

TEST(FailureDetection, AParameterServerThatHangsFailsTheStepsAndTheJobRecoversWhenItAnswersAgain) {
  BookCluster c("hung_ps");
  c.extra = {"--heartbeat_timeout_secs=2"};
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(1500);
  ASSERT_TRUE(WaitForCheckpoint(c.logdir, 100, 120)) << Output(chief);
  ASSERT_TRUE(StopProcess(ps)) << "the ps did not stop";
  const auto stopped = std::chrono::steady_clock::now();
  // Silent past the 2 s limit: the chief's step fails naming the ps; then it
  // answers again.
  EXPECT_TRUE(WaitForOutput(chief, "(the cluster's coordinator) has not answered heartbeats", 60)) << Output(chief);
  // Stopped for longer than its heartbeat loop's interval + timeout (1 + 2
  // s), so that on resume the ps (the coordinator) sees the gap in its own
  // loop: the workers' silence then was its own pause, not theirs.
  std::this_thread::sleep_until(stopped + std::chrono::seconds(4));
  ASSERT_TRUE(ContinueProcess(ps)) << "the ps did not continue";
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief) << "\n--- ps:\n" << Output(ps) << "\n--- worker 1:\n" << Output(w1);
  const std::string out = Output(chief);
  // The waiting step failed naming the ps instead of hanging; the session
  // was recreated and training finished.
  EXPECT_NE(out.find("/job:ps/replica:0/task:0 (the cluster's coordinator) has not answered heartbeats"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
  EXPECT_NE(Output(ps).find("The coordinator's own heartbeat loop did not run for"), std::string::npos) << Output(ps);
}

TEST(Recovery, TasksStartInAnyOrderEvenTheParameterServerLast) {
  BookCluster c("any_order");
  c.extra = {"--sync_replicas"};
  Proc chief = Spawn(c.Args("worker", 0, 200));
  Proc w1 = Spawn(c.Args("worker", 1, 200));
  // The ps starts once the chief is waiting for it.
  EXPECT_TRUE(WaitForOutput(chief, "Waiting for /job:ps", 60)) << Output(chief);
  Proc ps = Spawn(c.Args("ps", 0, 0));
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
  EXPECT_NE(Output(chief).find("All 2 workers are done"), std::string::npos) << Output(chief);
}

TEST(Recovery, SyncFlagsThatCannotWorkAreRejected) {
  // The book's cluster has three workers.
  Proc more = Spawn({MNIST_DISTRIBUTED_BIN, "--sync_replicas", "--replicas_to_aggregate=4"});
  EXPECT_EQ(Wait(more, 30), 2);
  EXPECT_NE(Output(more).find("--replicas_to_aggregate=4 but the cluster has 3 workers"), std::string::npos)
      << Output(more);
  Proc async = Spawn({MNIST_DISTRIBUTED_BIN, "--replicas_to_aggregate=2"});
  EXPECT_EQ(Wait(async, 30), 2);
  EXPECT_NE(Output(async).find("needs --sync_replicas"), std::string::npos) << Output(async);
}

TEST(Recovery, BookFlagsAreCheckedAndTheDefaultsAreTheBooksCluster) {
  Proc both = Spawn({MNIST_DISTRIBUTED_BIN, "--cluster_spec=ps|a:1,worker|b:2", "--ps_hosts=a:1"});
  EXPECT_EQ(Wait(both, 30), 2);
  EXPECT_NE(Output(both).find("not both"), std::string::npos) << Output(both);
  Proc job = Spawn({MNIST_DISTRIBUTED_BIN, "--job_name=chief"});
  EXPECT_EQ(Wait(job, 30), 2);
  EXPECT_NE(Output(job).find("use ps or worker"), std::string::npos) << Output(job);
  // The book's cluster has three workers: task 3 does not exist.
  Proc task = Spawn({MNIST_DISTRIBUTED_BIN, "--task_index=3"});
  EXPECT_EQ(Wait(task, 30), 2);
  EXPECT_NE(Output(task).find("bad --task_index"), std::string::npos) << Output(task);
}

}  // namespace
}  // namespace process_test
}  // namespace distflow
