// Elastic jobs started by distflow-launch with real processes on loopback:
// --min_workers/--max_workers start joiners and replace a worker that dies;
// a host discovery script grows and shrinks the job and a host whose
// workers fail is blacklisted; a script that misbehaves and bad worker
// counts are named. (Workers joining and leaving by themselves are in
// elastic_test.cc.)
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::NumberAfter;
using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::TempPath;
using subprocess::Wait;
using subprocess::WaitForOutput;

TEST(ElasticLaunch, MinAndMaxWorkersStartJoinersAndReplaceAWorkerThatDies) {
  Proc launch =
      Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "1", "--min_workers", "2", "--max_workers", "3", "--restart_on_failure=1",
             "--", MNIST_DISTRIBUTED_BIN, "--model=softmax", "--train_steps=2000", "--learning_rate=0.003",
             "--print_every=100", "--heartbeat_timeout_secs=2", "--wait_for_workers_secs=60", "--progress=false"});
  // worker:1 (a task of the spec, not the chief) dies once it trains.
  ASSERT_TRUE(WaitForOutput(launch, "[worker:1] Worker : 1, Step:", 120)) << Output(launch);
  const std::string before = Output(launch);
  const size_t at = before.find("worker:1 (127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << before;
  const double pid = NumberAfter(before.substr(at), ", pid ");
  ASSERT_GT(pid, 0) << before;
  kill(static_cast<pid_t>(pid), SIGKILL);
  EXPECT_EQ(Wait(launch, 240), 0) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("worker:1 was killed by signal 9 (Killed); a new worker joins the job in its place (1 of 1"),
            std::string::npos)
      << out;
  // The joiner started with the job (+1) and the replacement (+2) get the
  // next two task indices, in the order they reach the coordinator.
  const double first = NumberAfter(out, "[worker:+1] This is /job:worker/task:");
  const double second = NumberAfter(out, "[worker:+2] This is /job:worker/task:");
  EXPECT_TRUE((first == 2 && second == 3) || (first == 3 && second == 2)) << out;
  EXPECT_NE(out.find("(placed by the coordinator at " + std::string("127.0.0.1:")), std::string::npos) << out;
  EXPECT_NE(out.find("2 worker(s) joined the running job; all of them have left"), std::string::npos) << out;
  EXPECT_GE(NumberAfter(out, "[worker:0] Test-Accuracy: "), 0.7) << out;
  EXPECT_NE(out.find("[launch] every task finished"), std::string::npos) << out;
}

void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  {
    std::ofstream f(path + ".new");
    f << text;
  }
  if (executable) chmod((path + ".new").c_str(), 0755);
  std::rename((path + ".new").c_str(), path.c_str());  // whole, for a script reading it meanwhile
}

// Host discovery on loopback hosts (127.0.0.x are this machine's): the
// script lists 127.0.0.1 with 2 slots and 127.0.0.3 with 1, where every
// worker fails (the wrapper below), so the host is blacklisted after two
// failures; then 127.0.0.2 appears and takes a joining worker, and
// disappears again, which stops that worker. The job trains synchronously
// with the aggregation following the workers (--sync_replicas --elastic),
// finishes and learns.
TEST(ElasticLaunch, HostDiscoveryGrowsAndShrinksTheJobAndBlacklistsAHostWhoseWorkersFail) {
  const std::string hosts = TempPath("hosts");
  const std::string wrapper = TempPath("wrapper.sh");
  WriteFile(hosts, "127.0.0.1:2\n127.0.0.3:1\n");
  WriteFile(
      wrapper,
      absl::StrCat("#!/bin/sh\ncase \"$DISTFLOW_JOIN_AS\" in 127.0.0.3:*) echo 'this host is broken' >&2; "
                   "exit 1;; esac\ncase \" $* \" in *\" --join\"*) echo 'join flags in argv' >&2; exit 3;; esac\nexec ",
                   MNIST_DISTRIBUTED_BIN, " \"$@\"\n"),
      /*executable=*/true);
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN,
                       "--ps",
                       "1",
                       "--min_workers",
                       "2",
                       "--max_workers",
                       "3",
                       "--host_discovery_script",
                       "cat " + hosts,
                       "--discovery_interval_secs",
                       "1",
                       "--",
                       wrapper,
                       "--model=softmax",
                       "--train_steps=3000",
                       "--learning_rate=0.003",
                       "--print_every=100",
                       "--heartbeat_timeout_secs=2",
                       "--wait_for_workers_secs=60",
                       "--progress=false",
                       "--sync_replicas",
                       "--elastic",
                       "--sync_step_timeout_secs=60"});
  ASSERT_TRUE(WaitForOutput(launch, "host 127.0.0.3 is blacklisted: 2 of its workers failed", 120)) << Output(launch);
  ASSERT_TRUE(WaitForOutput(launch, "[worker:1] Worker : 1, Step:", 120)) << Output(launch);
  WriteFile(hosts, "127.0.0.1:2\n127.0.0.3:1\n127.0.0.2:1\n");
  ASSERT_TRUE(WaitForOutput(launch, "127.0.0.2 has a free slot: worker:+3 joins the job there", 30)) << Output(launch);
  ASSERT_TRUE(WaitForOutput(launch, "[worker:+3] This is /job:worker/task:", 60)) << Output(launch);
  ASSERT_TRUE(WaitForOutput(launch, "[worker:+3] Worker : ", 120)) << Output(launch);
  WriteFile(hosts, "127.0.0.1:2\n");
  ASSERT_TRUE(WaitForOutput(launch, "worker:+3 on 127.0.0.2: the host is no longer listed; stopping the worker", 30))
      << Output(launch);
  EXPECT_EQ(Wait(launch, 240), 0) << Output(launch);
  const std::string out = Output(launch);
  // The spec's two workers were placed on 127.0.0.1's slots.
  EXPECT_NE(out.find("worker|127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("worker:+1 on 127.0.0.3 exited with status 1 (1 failure(s) on that host)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("worker:+2 on 127.0.0.3 exited with status 1 (2 failure(s) on that host)"), std::string::npos)
      << out;
  // No worker started on the blacklisted host after it was blacklisted.
  EXPECT_EQ(out.find("127.0.0.3 has a free slot", out.find("host 127.0.0.3 is blacklisted")), std::string::npos) << out;
  EXPECT_NE(out.find("worker:+3 stopped ("), std::string::npos) << out;
  // Joiners learn where to join from their environment, never from flags.
  EXPECT_EQ(out.find("join flags in argv"), std::string::npos) << out;
  // The chief aggregated the third worker's gradients while it was in the job.
  const size_t three = out.find("aggregating 3 gradients per step");
  ASSERT_NE(three, std::string::npos) << out;
  EXPECT_NE(out.find("aggregating 2 gradients per step", three), std::string::npos) << out;
  EXPECT_GE(NumberAfter(out, "[worker:0] Test-Accuracy: "), 0.7) << out;
  EXPECT_NE(out.find("[launch] every task finished"), std::string::npos) << out;
  std::remove(hosts.c_str());
  std::remove(wrapper.c_str());
}

// A minimum the script cannot meet within the wait, and scripts that print
// a malformed line, fail or hang: each named, and the launcher exits 1.
TEST(ElasticLaunch, HostDiscoveryThatCannotMeetTheMinimumOrMisbehavesIsNamed) {
  auto launch = [](const std::string& script, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {DISTFLOW_LAUNCH_BIN,
                                     "--ps",
                                     "1",
                                     "--min_workers",
                                     "2",
                                     "--max_workers",
                                     "3",
                                     "--host_discovery_script",
                                     script,
                                     "--min_workers_wait_secs",
                                     "2",
                                     "--discovery_timeout_secs",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/true"});
    Proc p = Spawn(args);
    const int code = Wait(p, 60);
    return std::make_pair(code, Output(p));
  };
  auto [code, out] = launch("echo 127.0.0.1:1");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("the host discovery script listed 1 slot(s) in 2 s; --min_workers=2 needs 2"), std::string::npos)
      << out;
  std::tie(code, out) = launch("echo 127.0.0.1:x");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("line 1 '127.0.0.1:x' of the host discovery script's output: slots 'x' is not a number"),
            std::string::npos)
      << out;
  std::tie(code, out) = launch("exit 3");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("the host discovery script 'exit 3' exited with status 3"), std::string::npos) << out;
  std::tie(code, out) = launch("sleep 30");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("the host discovery script 'sleep 30' did not finish within 1s; it was killed"), std::string::npos)
      << out;
  Proc alone = Spawn({DISTFLOW_LAUNCH_BIN, "--host_discovery_script", "echo 127.0.0.1:2", "--", "/bin/true"});
  EXPECT_EQ(Wait(alone, 30), 2);
  EXPECT_NE(Output(alone).find("--host_discovery_script needs --min_workers and --max_workers"), std::string::npos)
      << Output(alone);
}

TEST(ElasticLaunch, BadWorkerCountsExitTwoNamingThem) {
  Proc above = Spawn({DISTFLOW_LAUNCH_BIN, "--min_workers", "4", "--max_workers", "2", "--", "/bin/true"});
  EXPECT_EQ(Wait(above, 30), 2);
  EXPECT_NE(Output(above).find("--min_workers=4 is above --max_workers=2"), std::string::npos) << Output(above);
  Proc one = Spawn({DISTFLOW_LAUNCH_BIN, "--max_workers", "2", "--", "/bin/true"});
  EXPECT_EQ(Wait(one, 30), 2);
  EXPECT_NE(Output(one).find("--min_workers=0 --max_workers=2: give both"), std::string::npos) << Output(one);
  Proc both =
      Spawn({DISTFLOW_LAUNCH_BIN, "--workers", "3", "--min_workers", "1", "--max_workers", "2", "--", "/bin/true"});
  EXPECT_EQ(Wait(both, 30), 2);
  EXPECT_NE(Output(both).find("--workers=3 and --min_workers/--max_workers: pass one"), std::string::npos)
      << Output(both);
}

}  // namespace
}  // namespace distflow
