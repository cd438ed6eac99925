// Helpers of process_test's files (process_*_test.cc): tests that run the
// real binaries (distflow-server, the examples, distflow-launch) as
// separate processes on loopback. The binaries' paths come from the
// target's compile definitions (tests/integration/CMakeLists.txt). Each
// test owns its processes; nothing here is shared between tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace distflow {
namespace process_test {

using subprocess::ContinueProcess;
using subprocess::FreePort;
using subprocess::MakeCertificates;
using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::StopProcess;
using subprocess::TempPath;
using subprocess::Wait;
using subprocess::WaitForOutput;

// distflow-server tasks, killed (SIGKILL) when the Cluster goes if still running.
class Cluster {
 public:
  ~Cluster() {
    for (Proc& p : procs_) {
      if (p.pid > 0) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
      }
    }
  }
  Proc& Start(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {DISTFLOW_SERVER_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    procs_.push_back(Spawn(argv, env));
    return procs_.back();
  }
  std::vector<Proc> procs_;
};

// The newest committed checkpoint's step in `logdir`, or -1: the one the
// `checkpoint` state file names (model_checkpoint_path: "model.ckpt-N"),
// which the chief updates after the checkpoint's files are complete. (Index
// files can exist a moment before: a chief killed then restores the previous
// checkpoint, rightly.)
inline int64_t NewestCheckpointStep(const std::string& logdir) {
  std::ifstream in(logdir + "/checkpoint");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model_checkpoint_path:", 0) != 0) continue;
    size_t dash = line.rfind('-'), quote = line.rfind('"');
    if (dash == std::string::npos || quote == std::string::npos || quote < dash) return -1;
    int64_t step = -1;
    return absl::SimpleAtoi(line.substr(dash + 1, quote - dash - 1), &step) ? step : -1;
  }
  return -1;
}

// Waits until `logdir` holds a checkpoint of at least `step`; false after `seconds`.
inline bool WaitForCheckpoint(const std::string& logdir, int64_t step, int seconds) {
  return WaitUntil([&] { return NewestCheckpointStep(logdir) >= step; }, absl::Seconds(seconds),
                   absl::Milliseconds(50));
}

inline std::string NewLogdir(const std::string& tag) {
  std::string dir = absl::StrCat("/tmp/distflow_proc_", getpid(), "_", tag, "_logs");
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

// The book's program for every task: 1 ps + 2 workers (or `workers`).
struct BookCluster {
  std::string spec, logdir;
  int wait_for_workers_secs = 20;
  std::vector<std::string> extra;  // appended to every task's flags
  std::vector<std::string> Args(const std::string& job, int task, int steps) const {
    std::vector<std::string> args = {MNIST_DISTRIBUTED_BIN,
                                     "--cluster_spec=" + spec,
                                     "--job_name=" + job,
                                     absl::StrCat("--task_index=", task),
                                     "--model=softmax",
                                     "--learning_rate=0.003",
                                     absl::StrCat("--train_steps=", steps),
                                     "--logdir=" + logdir,
                                     "--save_checkpoint_steps=50",
                                     "--print_every=500",
                                     absl::StrCat("--wait_for_workers_secs=", wait_for_workers_secs)};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // The ps, worker 1 and the chief (worker 0), each worker training `steps`.
  struct Tasks {
    Proc ps, w1, chief;
  };
  Tasks StartPsAndTwoWorkers(int steps) const {
    return Tasks{Spawn(Args("ps", 0, 0)), Spawn(Args("worker", 1, steps)), Spawn(Args("worker", 0, steps))};
  }
  explicit BookCluster(const std::string& tag, int workers = 2) : logdir(NewLogdir(tag)) {
    spec = absl::StrCat("ps|127.0.0.1:", FreePort(), ",worker|127.0.0.1:", FreePort());
    for (int i = 1; i < workers; ++i) absl::StrAppend(&spec, ";127.0.0.1:", FreePort());
  }
};

// The step a restarted chief says it restored ("... at global step N"), or -1.
inline int64_t RestoredStep(const std::string& out) {
  size_t at = out.find("at global step ");
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + 15));
}

// How often `what` occurs in `text`.
inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace process_test
}  // namespace distflow
