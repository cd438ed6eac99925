// Network partitions between the tasks of the book's program (1 ps + 2
// workers, each a separate process running examples/mnist_distributed).
//
// The network is cut by TCP proxies of this test, not by network namespaces:
// every task reaches every other task through the other's proxy (its cluster
// spec names the proxies' ports for the others and its own real port for
// itself), and pausing the proxies stops every byte between the tasks while
// closing nothing, as a pulled cable or a dead switch does. Namespaces with
// veth pairs would need CAP_SYS_ADMIN, which a CI container need not grant;
// the proxies need nothing and cut the same TCP connections. Bulk transfer is
// off (its ports are not in the spec, so they would bypass the proxies), and
// so is gRPC over Unix-domain sockets (tasks of one host would find each
// other's sockets through the proxies and leave them).
//
// Detection is 10 s by default; the tests set it shorter to stay quick.
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "tcp_proxy.h"

namespace distflow {
namespace {

using subprocess::FreePort;
using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::Wait;
using subprocess::WaitForOutput;

// The book's cluster behind proxies: task 0 is the ps, 1 and 2 the workers.
class PartitionedBook {
 public:
  explicit PartitionedBook(const std::string& tag) {
    logdir_ = absl::StrCat("/tmp/distflow_partition_", getpid(), "_", tag);
    std::filesystem::remove_all(logdir_);
    for (int t = 0; t < 3; ++t) {
      ports_.push_back(FreePort());
      proxies_.push_back(std::make_unique<TcpProxy>(ports_.back()));
    }
  }
  ~PartitionedBook() {
    for (Proc* p : {&ps, &w1, &chief}) {
      if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        Wait(*p, 10);
      }
    }
  }

  // Starts the ps, worker 1 and the chief, the workers training `steps`.
  void Start(int steps, const std::vector<std::string>& flags) {
    ps = Spawn(Args(0, steps, flags), {"DISTFLOW_BULK_TRANSFER=0", "DISTFLOW_UNIX_SOCKETS=0"});
    w1 = Spawn(Args(2, steps, flags), {"DISTFLOW_BULK_TRANSFER=0", "DISTFLOW_UNIX_SOCKETS=0"});
    chief = Spawn(Args(1, steps, flags), {"DISTFLOW_BULK_TRANSFER=0", "DISTFLOW_UNIX_SOCKETS=0"});
  }
  // Cuts every task off from every other (or joins them again).
  void Cut() {
    for (auto& p : proxies_) p->Pause();
  }
  void Heal() {
    for (auto& p : proxies_) p->Resume();
  }
  // Waits until no byte has crossed for 200 ms (a cut's last in-flight
  // writes have landed), for at most 2 s; returns the bytes that crossed.
  uint64_t WaitForQuiet() {
    uint64_t last = Traffic();
    absl::Time still = absl::Now();  // when `last` was first seen
    WaitUntil(
        [&] {
          if (uint64_t now = Traffic(); now != last) {
            last = now;
            still = absl::Now();
          }
          return absl::Now() - still >= absl::Milliseconds(200);
        },
        absl::Seconds(2), absl::Milliseconds(20));
    return last;
  }
  // Connections the tasks have opened to each other so far.
  int Connections() const {
    int n = 0;
    for (const auto& p : proxies_) n += p->connections();
    return n;
  }
  void SetDelay(absl::Duration d) {
    for (auto& p : proxies_) p->SetDelay(d);
  }
  void DropConnections() {
    for (auto& p : proxies_) p->DropAll();
  }
  // Bytes that have crossed between the tasks so far.
  uint64_t Traffic() const {
    uint64_t n = 0;
    for (const auto& p : proxies_) n += p->bytes_forwarded();
    return n;
  }
  // Whether the chief has trained a while: its first checkpoint (at about
  // step 200) is saved.
  bool WaitForTraining(int seconds) { return WaitForOutput(chief, "Saved checkpoint", seconds); }

  Proc ps, w1, chief;

 private:
  std::vector<std::string> Args(int task, int steps, const std::vector<std::string>& flags) const {
    auto addr = [&](int t) { return absl::StrCat("127.0.0.1:", t == task ? ports_[t] : proxies_[t]->port()); };
    const std::string spec = absl::StrCat("ps|", addr(0), ",worker|", addr(1), ";", addr(2));
    std::vector<std::string> args = {MNIST_DISTRIBUTED_BIN,
                                     "--cluster_spec=" + spec,
                                     task == 0 ? "--job_name=ps" : "--job_name=worker",
                                     absl::StrCat("--task_index=", task == 0 ? 0 : task - 1),
                                     "--model=softmax",
                                     "--learning_rate=0.003",
                                     absl::StrCat("--train_steps=", steps),
                                     "--logdir=" + logdir_,
                                     "--save_checkpoint_steps=200",
                                     "--print_every=100",
                                     "--wait_for_workers_secs=20"};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  std::string logdir_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<TcpProxy>> proxies_;
};

// A cut shorter than the detection time: steps wait, then go on; nobody is
// declared dead and the job finishes as if nothing happened.
TEST(Partition, ACutShorterThanTheDetectionTimeHealsWithoutLosingTheJob) {
  PartitionedBook c("short");
  c.Start(1500, {"--heartbeat_timeout_secs=8"});
  ASSERT_TRUE(c.WaitForTraining(120)) << Output(c.chief);
  c.Cut();
  const absl::Time cut = absl::Now();
  const uint64_t during = c.WaitForQuiet();              // what was in flight has landed
  absl::SleepFor(cut + absl::Seconds(3) - absl::Now());  // the cut lasts 3 s
  EXPECT_EQ(c.Traffic(), during) << "nothing crosses a cut";
  c.Heal();
  EXPECT_EQ(Wait(c.chief, 240), 0) << Output(c.chief);
  EXPECT_GT(c.Traffic(), during);
  const std::string out = Output(c.chief);
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  EXPECT_EQ(out.find("has not answered heartbeats"), std::string::npos) << out;
  EXPECT_EQ(out.find("recovering"), std::string::npos) << "no step failed: " << out;
  EXPECT_EQ(Wait(c.w1, 60), 0) << Output(c.w1);
  EXPECT_EQ(Wait(c.ps, 30), 0) << Output(c.ps);
}

// A slow and flaky network short of a cut: 25 ms on every hop, and every
// connection between the tasks broken five times, 2 s apart. Steps slow
// down, and those a break hits fail and are run again on new connections;
// nobody is declared dead and the job finishes and learns.
TEST(Partition, ASlowFlakyNetworkSlowsTheJobButDoesNotFailIt) {
  PartitionedBook c("flaky");
  c.Start(1500, {"--heartbeat_timeout_secs=8"});
  ASSERT_TRUE(c.WaitForTraining(120)) << Output(c.chief);
  const int before = c.Connections();
  c.SetDelay(absl::Milliseconds(25));
  for (int i = 0; i < 5; ++i) {
    absl::SleepFor(absl::Seconds(2));
    c.DropConnections();
  }
  absl::SleepFor(absl::Seconds(2));
  c.SetDelay(absl::ZeroDuration());
  EXPECT_EQ(Wait(c.chief, 300), 0) << Output(c.chief);
  EXPECT_GE(c.Connections(), before + 5) << "the tasks connected again after the breaks";
  const std::string out = Output(c.chief);
  EXPECT_NE(out.find("Test-Accuracy"), std::string::npos) << out;
  EXPECT_EQ(out.find("has not answered heartbeats"), std::string::npos) << out;
  EXPECT_EQ(Wait(c.w1, 60), 0) << Output(c.w1);
  EXPECT_EQ(Wait(c.ps, 30), 0) << Output(c.ps);
}

// A cut longer than the detection time and the ps's grace: every task
// learns the others are gone, the ps gives up and ends, and the workers,
// after trying to recover for --recovery_timeout_secs, end with an error
// naming the ps: no hang, no false success.
TEST(Partition, ACutLongerThanTheDetectionTimeFailsTheJobClearly) {
  PartitionedBook c("long");
  c.Start(100000, {"--heartbeat_timeout_secs=2", "--orphan_grace_secs=3", "--recovery_timeout_secs=15"});
  ASSERT_TRUE(c.WaitForTraining(120)) << Output(c.chief);
  c.Cut();
  const absl::Time cut = absl::Now();
  // The ps sees both workers silent past 2 s, waits 3 s more, and stops.
  EXPECT_EQ(Wait(c.ps, 60), 1) << Output(c.ps);
  EXPECT_NE(Output(c.ps).find("gives up on its job"), std::string::npos) << Output(c.ps);
  EXPECT_LT(absl::Now() - cut, absl::Seconds(30)) << "detection plus grace is 5 s";
  absl::SleepFor(absl::Seconds(2));
  c.Heal();  // too late: the ps is gone
  const int chief_exit = Wait(c.chief, 120);
  const std::string out = Output(c.chief);
  EXPECT_NE(chief_exit, 0) << out;
  EXPECT_NE(chief_exit, -1) << "the chief hung: " << out;
  EXPECT_NE(out.find("/job:ps/replica:0/task:0"), std::string::npos) << "the error names the ps: " << out;
  EXPECT_EQ(out.find("Test-Accuracy"), std::string::npos) << "no false success: " << out;
  const int w1_exit = Wait(c.w1, 120);
  EXPECT_NE(w1_exit, 0) << Output(c.w1);
  EXPECT_NE(w1_exit, -1) << "worker 1 hung: " << Output(c.w1);
}

}  // namespace
}  // namespace distflow
