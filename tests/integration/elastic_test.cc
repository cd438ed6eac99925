// Elastic membership with real processes on loopback: workers that are not
// in the cluster spec join a running asynchronous job of the book's program
// through its coordinator (ps 0) and leave it, cleanly or by dying, while
// nobody else restarts; synchronous training whose aggregation follows the
// membership; SIGTERM to a worker, the chief or the ps. distflow-launch
// --min_workers/--max_workers and host discovery are in
// elastic_launch_test.cc.
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::ContinueProcess;
using subprocess::FreePort;
using subprocess::NumberAfter;
using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::StopProcess;
using subprocess::TempPath;
using subprocess::Wait;
using subprocess::WaitForOutput;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The book's program (softmax) for a 1 ps + 2 worker cluster, failure
// detection at 2 s.
struct Job {
  std::string ps_address = absl::StrCat("127.0.0.1:", FreePort());
  std::string spec = absl::StrCat("ps|", ps_address, ",worker|127.0.0.1:", FreePort(), ";127.0.0.1:", FreePort());
  int train_steps = 3000;
  std::vector<std::string> Common() const {
    return {MNIST_DISTRIBUTED_BIN,        "--model=softmax",
            "--learning_rate=0.003",      absl::StrCat("--train_steps=", train_steps),
            "--print_every=100",          "--heartbeat_timeout_secs=2",
            "--wait_for_workers_secs=60", "--progress=false"};
  }
  Proc Task(const std::string& job, int index, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = Common();
    args.insert(args.end(), {"--cluster_spec=" + spec, "--job_name=" + job, absl::StrCat("--task_index=", index)});
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args);
  }
  Proc Joiner(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = Common();
    args.insert(args.end(), {"--join=" + ps_address, absl::StrCat("--join_as=127.0.0.1:", FreePort())});
    args.insert(args.end(), extra.begin(), extra.end());
    return Spawn(args);
  }
};

// Neither the chief (output `chief`) nor `other` worker recovered a session,
// and the chief ran to the job's last step and learned.
void ExpectNobodyRestartedAndTheJobLearned(const Job& job, const std::string& chief, const std::string& other) {
  EXPECT_EQ(chief.find("recreating the session"), std::string::npos) << chief;
  EXPECT_EQ(other.find("recreating the session"), std::string::npos) << other;
  const size_t ran = chief.find("Worker 0 ran ");
  ASSERT_NE(ran, std::string::npos) << chief;
  EXPECT_GE(NumberAfter(chief.substr(ran), " of the "), job.train_steps) << chief;
  EXPECT_GE(NumberAfter(chief, "Test-Accuracy: "), 0.7) << chief;
}

TEST(Elastic, WorkersJoinAndLeaveARunningAsyncJobWithoutRestartingAnyone) {
  Job job;
  // Long enough that a joiner starting late on a loaded machine still runs
  // its 150 steps before the job ends (at 3,000 one ran 92 in CI).
  job.train_steps = 8000;
  Proc ps = job.Task("ps", 0);
  Proc w1 = job.Task("worker", 1);
  Proc chief = job.Task("worker", 0);
  // One joiner trains 150 steps of its own and leaves cleanly; the other is
  // killed while it trains. They start with the job: a joiner that reads its
  // data on a loaded machine could otherwise reach the coordinator after
  // the job has ended (and the chief only waits for workers that joined).
  Proc leaver = job.Joiner({"--local_steps=150"});
  Proc victim = job.Joiner();
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(victim, "model is ready", 120)) << Output(victim);
  ASSERT_TRUE(WaitForOutput(victim, ", Step: ", 120)) << Output(victim);
  const std::string victim_out = Output(victim);
  kill(victim.pid, SIGKILL);
  EXPECT_EQ(Wait(victim, 10), 128 + SIGKILL);

  EXPECT_EQ(Wait(leaver, 120), 0) << Output(leaver);
  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);

  // Each joiner got a task beyond the spec's (2 and 3) from the coordinator.
  const std::string leaver_out = Output(leaver);
  const int leaver_task = static_cast<int>(NumberAfter(leaver_out, "This is /job:worker/task:"));
  const int victim_task = static_cast<int>(NumberAfter(victim_out, "This is /job:worker/task:"));
  EXPECT_EQ(std::min(leaver_task, victim_task), 2) << leaver_out << victim_out;
  EXPECT_EQ(std::max(leaver_task, victim_task), 3) << leaver_out << victim_out;
  for (const std::string* out : {&leaver_out, &victim_out}) {
    EXPECT_NE(out->find("placed by the coordinator at " + job.ps_address), std::string::npos) << *out;
  }
  EXPECT_NE(leaver_out.find("ran 150 of the "), std::string::npos) << leaver_out;
  const std::string ps_out = Output(ps);
  EXPECT_EQ(Count(ps_out, "joined the job from 127.0.0.1:"), 2) << ps_out;
  EXPECT_NE(ps_out.find(absl::StrCat("/job:worker/replica:0/task:", victim_task, " is declared dead")),
            std::string::npos)
      << ps_out;
  EXPECT_NE(ps_out.find(absl::StrCat("/job:worker/replica:0/task:", leaver_task, " left the cluster")),
            std::string::npos)
      << ps_out;
  // The chief waited for both joiners; the global step counted on through
  // the joins and leaves, to the end.
  const std::string out = Output(chief);
  EXPECT_NE(out.find("2 worker(s) joined the running job; all of them have left"), std::string::npos) << out;
  ExpectNobodyRestartedAndTheJobLearned(job, out, Output(w1));
}

// The shards follow the live workers (mnist_distributed's
// --reshard_every_steps): two workers train on halves of the data; a worker
// joins and everyone takes a third; worker 1 dies and, once it is declared
// dead, the two left take halves again. The chief's SIGTERM ends the job.
TEST(Elastic, ShardsFollowTheLiveWorkersAsTheyJoinAndDie) {
  Job job;
  job.train_steps = 10000000;  // the chief's SIGTERM ends the job
  const std::vector<std::string> reshard = {"--reshard_every_steps=10"};
  Proc ps = job.Task("ps", 0);
  Proc chief = job.Task("worker", 0, reshard);
  Proc w1 = job.Task("worker", 1, reshard);
  ASSERT_TRUE(WaitForOutput(chief, "Worker 0: training on shard 0 of 2 (27500 examples)", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(w1, "Worker 1: training on shard 1 of 2 (27500 examples)", 120)) << Output(w1);
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  Proc joiner = job.Joiner(reshard);
  ASSERT_TRUE(WaitForOutput(joiner, "Worker 2: training on shard 2 of 3 (18333 examples)", 120)) << Output(joiner);
  ASSERT_TRUE(WaitForOutput(chief, "training on shard 0 of 3 (18334 examples)", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(w1, "training on shard 1 of 3 (18333 examples)", 120)) << Output(w1);
  kill(w1.pid, SIGKILL);
  EXPECT_EQ(Wait(w1, 10), 128 + SIGKILL);
  ASSERT_TRUE(WaitForOutput(chief, "training on shard 0 of 2 (27500 examples)", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(joiner, "training on shard 1 of 2 (27500 examples)", 120)) << Output(joiner);
  kill(chief.pid, SIGTERM);
  EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
  EXPECT_EQ(Wait(joiner, 60), 0) << Output(joiner);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);
  // The chief's re-shards, in order: a third when the joiner came, a half
  // when worker 1 was gone.
  const std::string out = Output(chief);
  const size_t third = out.find("the job has 3 live workers; training on shard 0 of 3");
  const size_t half = out.find("the job has 2 live workers; training on shard 0 of 2");
  ASSERT_NE(third, std::string::npos) << out;
  ASSERT_NE(half, std::string::npos) << out;
  EXPECT_LT(third, half) << out;
}

// Synchronous training that follows the membership: 2 workers aggregate 2
// gradients per step; a third joins and is waited for from then on (3);
// worker 1 is SIGKILLed and, once the coordinator declares it dead, is not
// waited for any more (2). Nobody restarts, and the job reaches its steps.
TEST(Elastic, SyncReplicasAggregateAsManyGradientsAsThereAreWorkersInTheJob) {
  Job job;
  job.train_steps = 2000;
  const std::vector<std::string> sync = {"--sync_replicas", "--elastic", "--sync_step_timeout_secs=60"};
  Proc ps = job.Task("ps", 0, sync);
  Proc w1 = job.Task("worker", 1, sync);
  Proc chief = job.Task("worker", 0, sync);
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(chief, "aggregating 2 gradients per step", 10)) << Output(chief);
  Proc joiner = job.Joiner(sync);
  ASSERT_TRUE(WaitForOutput(joiner, ", Step: ", 120)) << Output(joiner);
  ASSERT_TRUE(WaitForOutput(chief, "aggregating 3 gradients per step", 60)) << Output(chief);
  kill(w1.pid, SIGKILL);
  EXPECT_EQ(Wait(w1, 10), 128 + SIGKILL);

  EXPECT_EQ(Wait(chief, 180), 0) << Output(chief);
  EXPECT_EQ(Wait(joiner, 60), 0) << Output(joiner);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);
  const std::string out = Output(chief);
  // The count followed the membership: 2, then 3 from the join on, then 2
  // again once worker 1 was declared dead, each from a later global step.
  const size_t two = out.find("aggregating 2 gradients per step");
  // The last change to 3 (a joiner slow to start heartbeating may be
  // counted out and in again before it).
  const size_t three = out.rfind("aggregating 3 gradients per step");
  ASSERT_NE(three, std::string::npos) << out;
  EXPECT_LT(two, three) << out;
  const size_t two_again = out.find("aggregating 2 gradients per step", three);
  ASSERT_NE(two_again, std::string::npos) << out;
  const double joined_at = NumberAfter(out.substr(three), "per step from global step ");
  const double dead_at = NumberAfter(out.substr(two_again), "per step from global step ");
  EXPECT_GT(joined_at, 0) << out;
  EXPECT_GT(dead_at, joined_at) << out;
  // The last step applied (after the kill) aggregated 2.
  EXPECT_NE(out.find("; the last step aggregated 2\n"), std::string::npos) << out;
  EXPECT_NE(Output(ps).find("/job:worker/replica:0/task:1 is declared dead"), std::string::npos) << Output(ps);
  ExpectNobodyRestartedAndTheJobLearned(job, out, Output(joiner));
}

// SIGTERM, as Kubernetes, SLURM and distflow-launch send on scale-down:
// worker 1 finishes its step and leaves the job (the coordinator records it
// as left, not dead) and exits 0, while the others train on; then the chief
// is told to stop: the joined worker leaves after its step when the chief
// asks, and the chief saves a checkpoint, ends the cluster and exits 0.
TEST(Elastic, SigtermMakesAWorkerLeaveCleanlyAndTheChiefEndTheJobWithACheckpoint) {
  Job job;
  job.train_steps = 10'000'000;  // never reached: the job ends on SIGTERM
  const std::string logdir = TempPath("logdir");
  Proc ps = job.Task("ps", 0);
  Proc w1 = job.Task("worker", 1);
  Proc chief = job.Task("worker", 0, {"--logdir=" + logdir});
  // The joiner starts with the job (see the first test).
  Proc joiner = job.Joiner();
  ASSERT_TRUE(WaitForOutput(w1, "Worker : 1, Step:", 120)) << Output(w1);
  kill(w1.pid, SIGTERM);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_NE(Output(w1).find("Worker 1: SIGTERM; leaving the job after global step "), std::string::npos) << Output(w1);
  ASSERT_TRUE(WaitForOutput(ps, "/job:worker/replica:0/task:1 left the cluster", 30)) << Output(ps);

  ASSERT_TRUE(WaitForOutput(joiner, ", Step: ", 120)) << Output(joiner);
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  kill(chief.pid, SIGTERM);
  EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
  EXPECT_EQ(Wait(joiner, 60), 0) << Output(joiner);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);

  const std::string out = Output(chief);
  EXPECT_NE(out.find("Worker 0: SIGTERM; leaving the job after global step "), std::string::npos) << out;
  EXPECT_NE(Output(joiner).find("the job was asked to stop; leaving the job after global step "), std::string::npos)
      << Output(joiner);
  // The chief waited for every worker, saved where the job stood and ended the cluster.
  EXPECT_NE(out.find("1 worker(s) joined the running job; all of them have left"), std::string::npos) << out;
  EXPECT_NE(out.find("All 3 workers are done; cluster shut down"), std::string::npos) << out;
  const size_t saved = out.find("Worker 0 (chief): SIGTERM: saved " + logdir + "/model.ckpt-");
  ASSERT_NE(saved, std::string::npos) << out;
  EXPECT_GT(NumberAfter(out.substr(saved), " at global step "), 0) << out;
  EXPECT_EQ(out.find("Test-Accuracy"), std::string::npos) << out;
  std::ifstream checkpoint(logdir + "/checkpoint");
  EXPECT_TRUE(checkpoint.good()) << logdir;
  const std::string ps_out = Output(ps);
  EXPECT_EQ(ps_out.find("declared dead"), std::string::npos) << ps_out;
  EXPECT_NE(ps_out.find("Shutdown requested: the chief was told to stop (SIGTERM)"), std::string::npos) << ps_out;
  EXPECT_NE(ps_out.find("ps 0: the cluster was shut down"), std::string::npos) << ps_out;
  std::system(("rm -rf " + logdir).c_str());
}

// SIGTERM to the ps (its machine is being drained): it sets the job's stop
// flag and keeps serving; every worker leaves after its step, the chief
// saves a checkpoint and ends the cluster, and every process exits 0. A ps
// told to stop before any worker started training just stops, and one whose
// chief is dead stops once the coordinator declares it so.
TEST(Elastic, SigtermToThePsStopsTheJobCleanlyWithACheckpoint) {
  Job job;
  job.train_steps = 10'000'000;  // never reached: the job ends on SIGTERM
  const std::string logdir = TempPath("logdir");
  Proc ps = job.Task("ps", 0);
  Proc w1 = job.Task("worker", 1);
  Proc chief = job.Task("worker", 0, {"--logdir=" + logdir});
  ASSERT_TRUE(WaitForOutput(w1, "Worker : 1, Step:", 120)) << Output(w1);
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  kill(ps.pid, SIGTERM);
  EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);
  const std::string out = Output(chief);
  EXPECT_NE(Output(w1).find("Worker 1: the job was asked to stop; leaving the job after global step "),
            std::string::npos)
      << Output(w1);
  EXPECT_NE(out.find("Worker 0: the job was asked to stop; leaving the job after global step "), std::string::npos)
      << out;
  EXPECT_NE(out.find("All 2 workers are done; cluster shut down"), std::string::npos) << out;
  const size_t saved = out.find("Worker 0 (chief): the job was asked to stop: saved " + logdir + "/model.ckpt-");
  ASSERT_NE(saved, std::string::npos) << out;
  EXPECT_GT(NumberAfter(out.substr(saved), " at global step "), 0) << out;
  EXPECT_EQ(out.find("Test-Accuracy"), std::string::npos) << out;
  const std::string ps_out = Output(ps);
  EXPECT_NE(ps_out.find("ps 0: SIGTERM: asked the job to stop"), std::string::npos) << ps_out;
  EXPECT_NE(ps_out.find("Shutdown requested: a ps task was told to stop (SIGTERM)"), std::string::npos) << ps_out;
  EXPECT_NE(ps_out.find("ps 0: the cluster was shut down"), std::string::npos) << ps_out;
  EXPECT_EQ(ps_out.find("declared dead"), std::string::npos) << ps_out;
  std::system(("rm -rf " + logdir).c_str());

  Job idle;
  Proc lone_ps = idle.Task("ps", 0);
  ASSERT_TRUE(WaitForOutput(lone_ps, "serving on", 60)) << Output(lone_ps);
  kill(lone_ps.pid, SIGTERM);
  EXPECT_EQ(Wait(lone_ps, 30), 0) << Output(lone_ps);
  EXPECT_NE(Output(lone_ps).find("ps 0: SIGTERM before the job started training; stopping"), std::string::npos)
      << Output(lone_ps);

  // With its chief dead nobody would end the cluster: the ps stops once the
  // coordinator declares the chief dead, not at the end of its grace.
  Job orphaned;
  orphaned.train_steps = 10'000'000;
  Proc ps2 = orphaned.Task("ps", 0);
  Proc w1b = orphaned.Task("worker", 1);
  Proc chief2 = orphaned.Task("worker", 0);
  ASSERT_TRUE(WaitForOutput(chief2, "Worker : 0, Step:", 120)) << Output(chief2);
  kill(chief2.pid, SIGKILL);
  Wait(chief2, 10);
  kill(ps2.pid, SIGTERM);
  EXPECT_EQ(Wait(ps2, 20), 0) << Output(ps2);
  EXPECT_NE(Output(ps2).find("ps 0: SIGTERM: the chief is dead; stopping"), std::string::npos) << Output(ps2);
  kill(w1b.pid, SIGKILL);
  Wait(w1b, 10);
}

// A worker told to stop whose step cannot finish (its ps is frozen) does
// not hang: it exits 1 once --stop_grace_secs have passed, saying why.
TEST(Elastic, AWorkerThatCannotFinishItsStepAfterSigtermExitsWithinTheGrace) {
  Job job;
  job.train_steps = 10'000'000;
  Proc ps = job.Task("ps", 0);
  Proc chief = job.Task("worker", 0);
  Proc w1 = job.Task("worker", 1, {"--stop_grace_secs=2"});
  ASSERT_TRUE(WaitForOutput(w1, "Worker : 1, Step:", 120)) << Output(w1);
  // Stopped for certain before the SIGTERM: otherwise w1's step could
  // finish and it would exit 0.
  ASSERT_TRUE(StopProcess(ps)) << "the ps did not stop";
  kill(w1.pid, SIGTERM);
  EXPECT_EQ(Wait(w1, 60), 1) << Output(w1);
  EXPECT_NE(Output(w1).find("not stopped within --stop_grace_secs of the SIGTERM"), std::string::npos) << Output(w1);
  EXPECT_TRUE(ContinueProcess(ps)) << "the ps did not continue";
  kill(chief.pid, SIGKILL);
  kill(ps.pid, SIGKILL);
  Wait(chief, 10);
  Wait(ps, 10);
  Proc bad = job.Task("worker", 1, {"--stop_grace_secs=0"});
  EXPECT_EQ(Wait(bad, 30), 2) << Output(bad);
  EXPECT_NE(Output(bad).find("--stop_grace_secs must be at least 1, not 0"), std::string::npos) << Output(bad);
}

// ps 0 (the coordinator) is SIGKILLed while a joined worker trains and is
// restarted on its address: the joined worker heartbeats the new
// coordinator with its address and is taken back, so the chief still knows
// it joined and waits for it, and the job finishes.
TEST(Elastic, ARestartedCoordinatorTakesBackTheWorkersThatHadJoined) {
  Job job;
  // Long enough that the joiner is still training when ps 0 is killed.
  job.train_steps = 6000;
  Proc ps = job.Task("ps", 0);
  Proc w1 = job.Task("worker", 1);
  Proc chief = job.Task("worker", 0);
  // The joiner starts with the job (see the first test).
  Proc joiner = job.Joiner();
  ASSERT_TRUE(WaitForOutput(chief, "Worker : 0, Step:", 120)) << Output(chief);
  ASSERT_TRUE(WaitForOutput(joiner, ", Step: ", 120)) << Output(joiner) << Output(chief);
  kill(ps.pid, SIGKILL);
  EXPECT_EQ(Wait(ps, 10), 128 + SIGKILL);
  Proc ps2 = job.Task("ps", 0);
  ASSERT_TRUE(WaitForOutput(ps2, "/job:worker/replica:0/task:2 rejoined the job from 127.0.0.1:", 60)) << Output(ps2);
  EXPECT_EQ(Wait(chief, 240), 0) << Output(chief);
  EXPECT_EQ(Wait(joiner, 60), 0) << Output(joiner);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps2, 60), 0) << Output(ps2);
  const std::string out = Output(chief);
  EXPECT_NE(out.find("1 worker(s) joined the running job; all of them have left"), std::string::npos) << out;
  EXPECT_NE(Output(ps2).find("/job:worker/replica:0/task:2 left the cluster"), std::string::npos) << Output(ps2);
}

TEST(Elastic, AJoinIsRefusedWithAReasonWhenTheAddressIsTakenOrTheFlagsDoNotFit) {
  Job job;
  Proc ps = job.Task("ps", 0);
  // Joining as the address of a live task.
  ASSERT_TRUE(WaitForOutput(ps, "serving on", 60)) << Output(ps);
  std::vector<std::string> args = job.Common();
  args.insert(args.end(), {"--join=" + job.ps_address, "--join_as=" + job.ps_address});
  Proc taken = Spawn(args);
  EXPECT_EQ(Wait(taken, 60), 1) << Output(taken);
  EXPECT_NE(Output(taken).find(job.ps_address + " is already /job:ps/replica:0/task:0, which is alive"),
            std::string::npos)
      << Output(taken);
  // Following the membership is a kind of synchronous training.
  Proc elastic_async = job.Joiner({"--elastic"});
  EXPECT_EQ(Wait(elastic_async, 30), 2) << Output(elastic_async);
  EXPECT_NE(Output(elastic_async)
                .find("--elastic makes synchronous training follow the membership; add "
                      "--sync_replicas"),
            std::string::npos)
      << Output(elastic_async);
  Proc no_address = Spawn({MNIST_DISTRIBUTED_BIN, "--join=" + job.ps_address});
  EXPECT_EQ(Wait(no_address, 30), 2) << Output(no_address);
  EXPECT_NE(Output(no_address).find("--join needs --join_as=host:port"), std::string::npos) << Output(no_address);
  kill(ps.pid, SIGTERM);
  Wait(ps, 30);
}

}  // namespace
}  // namespace distflow
