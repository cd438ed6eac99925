// process_test: distflow-launch with the real book program and with small
// shell programs whose behaviour (exit status, lifetime) each test chooses;
// the chief's progress line on a real terminal (tmux); tasks that place
// themselves from the rank a process manager gives them.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"
#include "process_test_util.h"

namespace distflow {
namespace process_test {
namespace {

std::string WriteScript(const std::string& tag, const std::string& body) {
  const std::string path = absl::StrCat("/tmp/distflow_proc_", getpid(), "_", tag, ".sh");
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// Waits until `p`'s output holds `n` lines "pid N" and returns the pids.
std::vector<pid_t> WaitForPids(const Proc& p, size_t n, int seconds) {
  std::vector<pid_t> pids;
  WaitUntil(
      [&] {
        pids.clear();
        std::string out = Output(p);
        for (size_t at = out.find("pid="); at != std::string::npos; at = out.find("pid=", at + 1)) {
          pids.push_back(static_cast<pid_t>(std::atoi(out.c_str() + at + 4)));
        }
        return pids.size() >= n;
      },
      absl::Seconds(seconds), absl::Milliseconds(50));
  return pids;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

// True once none of `pids` is alive (within `seconds`).
bool AllGone(const std::vector<pid_t>& pids, int seconds) {
  return WaitUntil(
      [&] {
        for (pid_t p : pids) {
          if (Alive(p)) return false;
        }
        return true;
      },
      absl::Seconds(seconds), absl::Milliseconds(50));
}

TEST(Launch, OneCommandRunsTheBooksProgramOnOnePsAndThreeWorkers) {
  const std::string logdir = NewLogdir("launch");
  const int status_base = FreePort();
  Proc launch =
      Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "1", "--workers", "3", "--status_base_port", std::to_string(status_base),
             "--", MNIST_DISTRIBUTED_BIN, "--model=softmax", "--train_steps=500", "--learning_rate=0.003",
             "--print_every=100", "--logdir=" + logdir, "--wait_for_workers_secs=30"});
  EXPECT_EQ(Wait(launch, 240), 0) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("cluster up: all 4 tasks serving"), std::string::npos) << out;
  // Each task got its status port, ps first, and the launcher lists the pages.
  EXPECT_NE(out.find(absl::StrCat("[launch] status pages: ps:0 http://127.0.0.1:", status_base,
                                  "/status, worker:0 http://127.0.0.1:", status_base + 1, "/status")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(absl::StrCat("Status page of /job:worker/replica:0/task:2 on http://127.0.0.1:", status_base + 3,
                                  "/status")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[worker:0] Test-Accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker:2] Worker : 2, Step:"), std::string::npos) << out;
  EXPECT_NE(out.find("[ps:0] "), std::string::npos) << out;
  EXPECT_NE(out.find("[launch] every task finished"), std::string::npos) << out;
  // Whole lines only, each with its task (or the launcher) in front.
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("[ps:0] ", 0) == 0 || line.rfind("[worker:", 0) == 0 || line.rfind("[launch] ", 0) == 0)
        << "unprefixed line: " << line;
  }
}

TEST(Launch, TasksGetTheirFlagsAndDistflowConfig) {
  const std::string script = WriteScript("flags", "echo \"args: $*\"; echo \"config: $DISTFLOW_CONFIG\"\n");
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "2", "--base_port", std::to_string(FreePort()),
                       "--", script, "--model=x"});
  EXPECT_EQ(Wait(launch, 60), 0) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("[worker:1] args: --model=x --job_name=worker --task_index=1 --cluster_spec=worker|127.0.0.1:"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[worker:0] config: {\"cluster\": {\"worker\":[\"127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("\"task\": {\"type\": \"worker\", \"index\": 1}}"), std::string::npos) << out;
}

TEST(Launch, AFailingTaskStopsTheOthersAndIsNamed) {
  const std::string script =
      WriteScript("fail", "echo \"pid=$$\"\ncase \"$*\" in *task_index=1*) sleep 0.5; exit 3;; esac\nexec sleep 60\n");
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "3", "--grace_secs=5", "--", script});
  std::vector<pid_t> pids = WaitForPids(launch, 3, 30);
  EXPECT_EQ(Wait(launch, 60), 1) << Output(launch);
  EXPECT_NE(Output(launch).find("failed: worker:1 exited with status 3"), std::string::npos) << Output(launch);
  ASSERT_EQ(pids.size(), 3u) << Output(launch);
  EXPECT_TRUE(AllGone(pids, 10));
}

TEST(Launch, SigtermStopsEveryTask) {
  const std::string script = WriteScript("term", "echo \"pid=$$\"\nexec sleep 60\n");
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "2", "--", script});
  std::vector<pid_t> pids = WaitForPids(launch, 2, 30);
  ASSERT_EQ(pids.size(), 2u) << Output(launch);
  kill(launch.pid, SIGTERM);
  EXPECT_EQ(Wait(launch, 30), 130) << Output(launch);
  EXPECT_NE(Output(launch).find("stopping every task"), std::string::npos) << Output(launch);
  EXPECT_TRUE(AllGone(pids, 10));
}

TEST(Launch, ASecondSignalKillsTasksThatIgnoreTheFirst) {
  const std::string script = WriteScript("stubborn", "trap '' TERM\necho \"pid=$$\"\nwhile true; do sleep 0.1; done\n");
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "1", "--grace_secs=600", "--", script});
  std::vector<pid_t> pids = WaitForPids(launch, 1, 30);
  ASSERT_EQ(pids.size(), 1u) << Output(launch);
  kill(launch.pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(Alive(pids[0]));  // it ignores SIGTERM; the grace period is long
  kill(launch.pid, SIGINT);
  EXPECT_EQ(Wait(launch, 30), 130) << Output(launch);
  EXPECT_TRUE(AllGone(pids, 10));
}

TEST(Launch, NoTaskOutlivesALauncherKilledWithSigkill) {
  const std::string script = WriteScript("orphan", "echo \"pid=$$\"\nexec sleep 60\n");
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "3", "--", script});
  std::vector<pid_t> pids = WaitForPids(launch, 3, 30);
  ASSERT_EQ(pids.size(), 3u) << Output(launch);
  kill(launch.pid, SIGKILL);
  EXPECT_EQ(Wait(launch, 10), 128 + SIGKILL);
  // The parent-death signal kills them; init reaps them.
  EXPECT_TRUE(AllGone(pids, 10));
}

TEST(Launch, RestartOnFailureRestartsAFailedTask) {
  const std::string marker = absl::StrCat("/tmp/distflow_proc_", getpid(), "_restart_marker");
  std::remove(marker.c_str());
  const std::string script = WriteScript("restart", absl::StrCat("if [ ! -e ", marker, " ]; then touch ", marker,
                                                                 "; echo first; exit 4; fi\necho second\n"));
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "1", "--restart_on_failure=1", "--", script});
  EXPECT_EQ(Wait(launch, 60), 0) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("worker:0 exited with status 4; restarting it (1 of 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker:0] second"), std::string::npos) << out;
  std::remove(marker.c_str());
}

TEST(Launch, ATaskThatExitsAtOnceIsNamed) {
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "2", "--", "/bin/false"});
  EXPECT_EQ(Wait(launch, 60), 1) << Output(launch);
  EXPECT_NE(Output(launch).find("exited with status 1; stopping the other tasks"), std::string::npos) << Output(launch);
}

// With host discovery, a joining worker on a host whose workers all fail
// (exit at once) is not waited for: "cluster up" comes once the others
// serve, long before --up_timeout_secs, and names it. The workers run
// distflow-server, which answers the health check and runs until stopped.
TEST(Launch, ClusterUpDoesNotWaitForAJoinerThatFailedAtOnce) {
  const std::string program =
      WriteScript("broken_host", absl::StrCat("case \"$DISTFLOW_JOIN_AS\" in 127.0.0.3:*) echo 'this host is broken' "
                                              ">&2; exit 1;; esac\nexec ",
                                              DISTFLOW_SERVER_BIN, " \"$@\"\n"));
  Proc launch =
      Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "1", "--min_workers", "2", "--max_workers", "3", "--host_discovery_script",
             "printf '127.0.0.1:2\\n127.0.0.3:1\\n'", "--up_timeout_secs", "3600", "--", program});
  ASSERT_TRUE(WaitForOutput(launch, "cluster up: 3 tasks serving after ", 120)) << Output(launch);
  kill(launch.pid, SIGTERM);
  EXPECT_EQ(Wait(launch, 60), 130) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("; not waiting for worker:+1, which exited with status 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("do not answer a health check"), std::string::npos) << out;
}

TEST(Launch, BadCommandLinesExitTwo) {
  Proc none = Spawn({DISTFLOW_LAUNCH_BIN, "--workers", "2"});
  EXPECT_EQ(Wait(none, 30), 2);
  EXPECT_NE(Output(none).find("no program"), std::string::npos) << Output(none);
  Proc both = Spawn({DISTFLOW_LAUNCH_BIN, "--cluster_spec=worker|127.0.0.1:1", "--base_port=3000", "--", "/bin/true"});
  EXPECT_EQ(Wait(both, 30), 2);
  EXPECT_NE(Output(both).find("pass one of them"), std::string::npos) << Output(both);
  Proc bad = Spawn({DISTFLOW_LAUNCH_BIN, "--cluster_spec=worker|nohost", "--", "/bin/true"});
  EXPECT_EQ(Wait(bad, 30), 2);
  EXPECT_NE(Output(bad).find("bad --cluster_spec"), std::string::npos) << Output(bad);
  Proc zero = Spawn({DISTFLOW_LAUNCH_BIN, "--workers", "0", "--", "/bin/true"});
  EXPECT_EQ(Wait(zero, 30), 2);
  EXPECT_NE(Output(zero).find("need ps >= 0 and workers >= 1"), std::string::npos) << Output(zero);
  Proc missing = Spawn({DISTFLOW_LAUNCH_BIN, "--workers", "1", "--", "/nonexistent/trainer"});
  EXPECT_EQ(Wait(missing, 30), 2);
  EXPECT_NE(Output(missing).find("'/nonexistent/trainer' does not exist"), std::string::npos) << Output(missing);
  // A port someone holds: named before any task starts.
  const int port = FreePort();
  Cluster holder;
  holder.Start({absl::StrCat("--cluster_spec=worker|127.0.0.1:", port), "--job_name=worker", "--task_index=0"});
  Proc taken;
  WaitUntil(  // until the holder listens
      [&] {
        taken = Spawn({DISTFLOW_LAUNCH_BIN, absl::StrCat("--cluster_spec=worker|127.0.0.1:", port), "--", "/bin/true"});
        return Wait(taken, 30) == 2;
      },
      absl::Seconds(60), absl::Milliseconds(100));
  EXPECT_NE(Output(taken).find(absl::StrCat("task worker:0: port ", port, " on 127.0.0.1 is taken")), std::string::npos)
      << Output(taken);
}

// What a person sees on a terminal: the chief's progress line, in a real
// tmux pane, is one line redrawn in place, not one line per update.
TEST(Terminal, TheProgressLineIsRedrawnInPlaceUnderTmux) {
  const std::string spec = absl::StrCat("ps|127.0.0.1:", FreePort(), ",worker|127.0.0.1:", FreePort());
  Cluster c;
  c.Start({"--cluster_spec=" + spec, "--job_name=ps", "--task_index=0"});
  const std::string socket = absl::StrCat("distflow_test_", getpid());
  const std::string done = absl::StrCat("/tmp/distflow_proc_", getpid(), "_tmux_done");
  std::remove(done.c_str());
  // The chief in the pane; its exit status goes to a file when it ends.
  const std::string cmd = absl::StrCat(
      MNIST_DISTRIBUTED_BIN, " --cluster_spec='", spec,
      "' --model=softmax --train_steps=400 --print_every=100000 2>/dev/null; echo $? > ", done, "; sleep 600");
  const std::string start = absl::StrCat("tmux -L ", socket, " new-session -d -s t -x 150 -y 40 \"", cmd, "\"");
  ASSERT_EQ(std::system(start.c_str()), 0) << start;
  auto pane = [&] {
    std::string text;
    FILE* p = popen(absl::StrCat("tmux -L ", socket, " capture-pane -p -t t").c_str(), "r");
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
    if (p != nullptr) pclose(p);
    return text;
  };
  const bool finished = WaitUntil(
      [&] {
        std::ifstream f(done);
        return f.good() && f.peek() != EOF;
      },
      absl::Seconds(120), absl::Milliseconds(50));
  const std::string screen = pane();
  std::system(absl::StrCat("tmux -L ", socket, " kill-server").c_str());
  ASSERT_TRUE(finished) << screen;
  std::ifstream status(done);
  int code = -1;
  status >> code;
  EXPECT_EQ(code, 0) << screen;
  int rows = 0;
  std::istringstream lines(screen);
  for (std::string line; std::getline(lines, line);) rows += line.find("global step ") != std::string::npos;
  EXPECT_EQ(rows, 1) << screen;
  EXPECT_NE(screen.find("global step 400/400 (100%)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("Test-Accuracy"), std::string::npos) << screen;
  std::remove(done.c_str());
  for (Proc& p : c.procs_) EXPECT_EQ(Wait(p, 30), 0) << Output(p);
}

// Tasks that place themselves: no --job_name/--task_index, only the cluster,
// --job_layout and the rank a process manager (srun, mpirun) gives them.
class RankDerivation : public ::testing::Test {
 protected:
  void SetUp() override {
    // A run inside a SLURM or MPI job must not leak its own rank into the tasks.
    for (const char* var : {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "DISTFLOW_CONFIG"}) unsetenv(var);
  }

  // Trains 1 ps + 1 worker of the book's program, each told only its rank in `rank_var`.
  void TrainPlacedBy(const std::string& rank_var) {
    const std::string spec = absl::StrCat("ps|127.0.0.1:", FreePort(), ",worker|127.0.0.1:", FreePort());
    auto args = [&] {
      return std::vector<std::string>{MNIST_DISTRIBUTED_BIN, "--cluster_spec=" + spec,     "--job_layout=ps:1,worker:1",
                                      "--model=softmax",     "--train_steps=30",           "--learning_rate=0.003",
                                      "--print_every=1000",  "--wait_for_workers_secs=20", "--progress=false"};
    };
    Proc ps = Spawn(args(), {rank_var + "=0"});
    Proc chief = Spawn(args(), {rank_var + "=1"});
    EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
    EXPECT_EQ(Wait(ps, 30), 0) << Output(ps);
    const std::string out = Output(chief);
    EXPECT_NE(out.find(absl::StrCat("This is /job:worker/task:0 (placed by --job_layout=ps:1,worker:1 with ", rank_var,
                                    "=1)")),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("Worker 0 (chief): model is ready"), std::string::npos) << out;
    EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
    EXPECT_NE(out.find("All 1 workers are done"), std::string::npos) << out;
    EXPECT_NE(Output(ps).find("ps 0 serving on 127.0.0.1:"), std::string::npos) << Output(ps);
  }
};

TEST_F(RankDerivation, SlurmProcidPlacesTheBooksTasks) { TrainPlacedBy("SLURM_PROCID"); }

TEST_F(RankDerivation, OpenMpiRankPlacesTheBooksTasks) { TrainPlacedBy("OMPI_COMM_WORLD_RANK"); }

TEST_F(RankDerivation, BadLayoutsExitTwoNamingTheProblem) {
  const std::string spec = "--cluster_spec=ps|127.0.0.1:2222,worker|127.0.0.1:2223";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{spec, "--job_layout=ps:1,worker:2"},
       {"SLURM_PROCID=0"},
       "--job_layout=ps:1,worker:2 has 2 worker tasks but --cluster_spec has 1; make them agree"},
      {{spec, "--job_layout=ps:1,worker:1"},
       {"SLURM_PROCID=2"},
       "SLURM_PROCID=2 is beyond --job_layout=ps:1,worker:1, which places ranks 0..1"},
      {{spec, "--job_layout=ps:1,worker"}, {"SLURM_PROCID=0"}, "entry 'worker' is not JOB:COUNT"},
      {{spec, "--job_layout=ps:1,worker:1"}, {}, "none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK is set"},
      {{spec, "--job_layout=ps:1,worker:1", "--job_name=ps"},
       {"PMI_RANK=1"},
       "--job_name and --job_layout=ps:1,worker:1 with PMI_RANK=1 disagree on the job (ps vs worker)"},
  };
  for (const Case& k : cases) {
    // The book's program and distflow-server resolve their task alike.
    std::vector<std::string> mnist = {MNIST_DISTRIBUTED_BIN};
    mnist.insert(mnist.end(), k.args.begin(), k.args.end());
    Proc book = Spawn(mnist, k.env);
    EXPECT_EQ(Wait(book, 30), 2) << k.expect << "\n" << Output(book);
    EXPECT_NE(Output(book).find(k.expect), std::string::npos) << k.expect << "\n" << Output(book);
    Cluster c;
    Proc& server = c.Start(k.args, k.env);
    EXPECT_EQ(Wait(server, 30), 2) << k.expect << "\n" << Output(server);
    EXPECT_NE(Output(server).find(k.expect), std::string::npos) << k.expect << "\n" << Output(server);
  }
}

}  // namespace
}  // namespace process_test
}  // namespace distflow
