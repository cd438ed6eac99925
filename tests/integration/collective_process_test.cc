// All-reduce training with real processes: mnist_distributed --all_reduce,
// one process per worker and no ps, under the launcher and on its own.
#include <signal.h>
#include <sys/wait.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::FreePort;
using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::Wait;
using subprocess::WaitForOutput;

// The checksum each worker prints of its variables at the end.
std::string ChecksumOf(const std::string& out, int worker) {
  std::smatch m;
  const std::regex re(
      absl::StrCat("Worker ", worker, " ran [0-9]+ steps in [0-9.]+ s; variables checksum ([0-9a-f]+)"));
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

TEST(AllReduceTraining, TwoWorkersUnderTheLauncherEndWithIdenticalVariables) {
  Proc launch = Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "0", "--workers", "2", "--", MNIST_DISTRIBUTED_BIN, "--all_reduce",
                       "--model=softmax", "--train_steps=40", "--print_every=20", "--learning_rate=0.003"});
  EXPECT_EQ(Wait(launch, 180), 0) << Output(launch);
  const std::string out = Output(launch);
  EXPECT_NE(out.find("training with all-reduce across 2 workers"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker:1] Worker : 1, Step: 40"), std::string::npos) << out;
  const std::string c0 = ChecksumOf(out, 0), c1 = ChecksumOf(out, 1);
  ASSERT_FALSE(c0.empty()) << out;
  EXPECT_EQ(c0, c1) << "the replicas differ after training:\n" << out;
  EXPECT_NE(out.find("[worker:0] Test-Accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("[launch] every task finished"), std::string::npos) << out;
}

// A worker SIGKILLed while the three train: the other two fail (instead of
// waiting forever in a collective) with an error naming the dead task.
TEST(AllReduceTraining, ASigkilledWorkerFailsTheOthersNamingIt) {
  const std::string spec =
      absl::StrCat("worker|127.0.0.1:", FreePort(), ";127.0.0.1:", FreePort(), ";127.0.0.1:", FreePort());
  std::vector<Proc> workers;
  for (int t = 0; t < 3; ++t) {
    workers.push_back(Spawn({MNIST_DISTRIBUTED_BIN, "--cluster_spec=" + spec, "--job_name=worker",
                             absl::StrCat("--task_index=", t), "--all_reduce", "--model=softmax",
                             "--train_steps=1000000", "--print_every=10", "--recovery_timeout_secs=3"}));
  }
  ASSERT_TRUE(WaitForOutput(workers[2], "Worker : 2, Step: 20", 120)) << Output(workers[2]);
  kill(workers[2].pid, SIGKILL);
  EXPECT_EQ(Wait(workers[2], 10), 128 + SIGKILL);
  for (int t : {0, 1}) {
    const int code = Wait(workers[static_cast<size_t>(t)], 90);
    const std::string out = Output(workers[static_cast<size_t>(t)]);
    EXPECT_NE(code, -1) << "worker " << t << " still waits after its peer died:\n" << out;
    EXPECT_NE(code, 0) << out;
    // The collective's own error, naming the dead rank and its task.
    EXPECT_NE(out.find("rank 2 (/job:worker/replica:0/task:2) failed or cannot be reached"), std::string::npos)
        << "worker " << t << ":\n"
        << out;
  }
}

}  // namespace
}  // namespace distflow
