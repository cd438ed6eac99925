// A session that needs a task the cluster knows is gone: ps 0 (the
// coordinator) and the chief are real servers in this process, worker 1 is
// a distflow-server process. Once worker 1 is SIGKILLed and declared dead,
// or has left the job (SIGTERM: a clean stop), a new session on the chief
// that needs it fails at once naming it and why, instead of waiting
// wait_for_cluster_ms; a session whose device filters leave it out is not
// affected; and once worker 1 is started again on its address, sessions
// need it like any task again.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "coordination/coordination.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "server/grpc_server.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::Output;
using subprocess::Proc;
using subprocess::Spawn;
using subprocess::Wait;

const char kWorker1[] = "/job:worker/replica:0/task:1";

class DeadTaskSession : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    ServerOptions o;
    o.heartbeat_interval_ms = 200;
    o.heartbeat_timeout_ms = 1500;
    o.orphan_grace_ms = -1;
    for (auto [job, task] : {std::pair<const char*, int>{"ps", 0}, {"worker", 0}}) {
      absl::StatusOr<std::unique_ptr<Server>> s = Server::Create(spec_, job, task, o);
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_TRUE((*s)->Start().ok());
      servers_.push_back(std::move(*s));
    }
    StartWorker1();
  }
  void TearDown() override {
    if (w1_.pid > 0) {
      kill(w1_.pid, SIGKILL);
      Wait(w1_, 10);
    }
    for (auto& s : servers_) s->Stop();
  }
  void StartWorker1() {
    absl::StatusOr<std::string> flag = spec_.ToFlagString();
    ASSERT_TRUE(flag.ok()) << flag.status();
    w1_ = Spawn({DISTFLOW_SERVER_BIN, "--cluster_spec=" + *flag, "--job_name=worker", "--task_index=1",
                 "--heartbeat_interval_secs=0.2", "--heartbeat_timeout_secs=1.5"});
  }
  Server& chief() { return *servers_[1]; }
  // Worker 1's state as the chief's failure detector last heard it from the coordinator.
  std::string StateOfWorker1() {
    std::map<std::string, proto::TaskHealth> view = chief().impl()->coordination()->View();
    auto it = view.find(kWorker1);
    return it == view.end() ? "" : proto::TaskHealth::State_Name(it->second.state());
  }
  bool WaitForWorker1(const std::string& state) {
    return WaitUntil([&] { return StateOfWorker1() == state; }, absl::Seconds(60));
  }
  // A step on the chief that needs worker 1: 7 made there, plus 1.
  absl::StatusOr<float> RunOnBoth(const std::vector<std::string>& filters = {}) {
    Scope root = Scope::NewRootScope();
    auto w0 = root.WithDevice("/job:worker/task:0");
    auto seven = ops::Const(root.WithDevice(filters.empty() ? "/job:worker/task:1" : "/job:worker/task:0"), 7.0f);
    auto eight = ops::Add(w0, seven, ops::Const(w0, 1.0f));
    SessionOptions o;
    o.wait_for_cluster_ms = 120000;  // what the session would wait for a task it does not know is gone
    o.device_filters = filters;
    Session sess(chief().target(), o);
    absl::StatusOr<std::vector<Tensor>> out = sess.Run({eight});
    if (!out.ok()) return out.status();
    return (*out)[0].scalar<float>();
  }
  // The step fails at once, naming worker 1 and `why`; a session that
  // leaves worker 1 out runs.
  void ExpectGoneNamed(const std::string& why) {
    const absl::Time start = absl::Now();
    absl::StatusOr<float> r = RunOnBoth();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    const std::string msg(r.status().message());
    EXPECT_TRUE(absl::StrContains(msg, absl::StrCat("The session needs the devices of ", kWorker1))) << msg;
    EXPECT_TRUE(absl::StrContains(msg, why)) << msg;
    EXPECT_TRUE(absl::StrContains(msg, "start it again on its address")) << msg;
    EXPECT_FALSE(absl::StrContains(msg, "Gave up after")) << "it waited out wait_for_cluster_ms: " << msg;
    std::printf("a session needing a gone task failed after %.2f s: %s\n", absl::ToDoubleSeconds(absl::Now() - start),
                msg.c_str());
    absl::StatusOr<float> without = RunOnBoth({"/job:ps", "/job:worker/task:0"});
    ASSERT_TRUE(without.ok()) << without.status();
    EXPECT_EQ(*without, 8.0f);
  }
  // Worker 1 started again on its address: sessions need it, and get it.
  void ExpectBackAfterRestart() {
    StartWorker1();
    ASSERT_TRUE(WaitForWorker1("ALIVE")) << StateOfWorker1() << "\n" << Output(w1_);
    absl::StatusOr<float> r = RunOnBoth();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, 8.0f);
  }

  ClusterSpec spec_;
  std::vector<std::unique_ptr<Server>> servers_;
  Proc w1_;
};

TEST_F(DeadTaskSession, ATaskDeclaredDeadIsNamedAtOnceAndWaitedForAgainOnceRestarted) {
  absl::StatusOr<float> first = RunOnBoth();  // waits for worker 1 to come up
  ASSERT_TRUE(first.ok()) << first.status() << "\n" << Output(w1_);
  EXPECT_EQ(*first, 8.0f);
  ASSERT_TRUE(WaitForWorker1("ALIVE")) << StateOfWorker1();
  kill(w1_.pid, SIGKILL);
  ASSERT_EQ(Wait(w1_, 10), 128 + SIGKILL);
  ASSERT_TRUE(WaitForWorker1("DEAD")) << StateOfWorker1();
  ExpectGoneNamed("declared it dead: no heartbeat for ");
  ExpectBackAfterRestart();
}

TEST_F(DeadTaskSession, ATaskThatLeftTheJobIsNamedAtOnceAndWaitedForAgainOnceRestarted) {
  ASSERT_TRUE(WaitForWorker1("ALIVE")) << StateOfWorker1() << "\n" << Output(w1_);
  kill(w1_.pid, SIGTERM);  // a clean stop: the server says goodbye
  ASSERT_EQ(Wait(w1_, 30), 0) << Output(w1_);
  ASSERT_TRUE(WaitForWorker1("LEFT")) << StateOfWorker1();
  ExpectGoneNamed("it left the job (its server stopped cleanly");
  ExpectBackAfterRestart();
}

}  // namespace
}  // namespace distflow
