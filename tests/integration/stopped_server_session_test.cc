// A MonitoredSession on a server of this process that has stopped ends at
// once with that server's error ("The server at ... in this process has
// stopped", Unavailable) instead of treating it as a task still starting:
// neither the non-chief's wait for the model (ready_timeout) nor a failed
// step's recovery (recovery_timeout) waits for a server that cannot come
// back. Both timeouts are ten minutes here, far beyond the test's own
// limit: a session that waited would never let the test finish.
#include <memory>
#include <string>
#include <vector>

#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/supervisor.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

struct Model {
  Scope root = Scope::NewRootScope();
  Output step;
  Operation train;
};

// A variable on the ps and a step that counts.
Model BuildModel(const ClusterSpec& spec, const std::string& worker) {
  Model m;
  Scope s = m.root.WithDeviceFunction(ReplicaDeviceSetter(spec, worker));
  ops::MakeVariable(s.WithOpName("w"), ops::Const(s, 1.0f));
  m.step = CreateGlobalStep(s);
  m.train = ops::AssignAdd(s, m.step, ops::Const(s, int64_t{1})).op();
  return m;
}

SupervisorOptions PatientOptions(const Model& m, bool chief) {
  SupervisorOptions o;
  o.is_chief = chief;
  o.global_step = m.step;
  o.ready_timeout = absl::Minutes(10);
  o.recovery_timeout = absl::Minutes(10);
  o.recovery_wait = absl::Milliseconds(10);
  o.session_options.wait_for_cluster_ms = 600000;
  return o;
}

class StoppedServerSession : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto servers = StartLocalCluster(spec_);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
  }

  Server* Worker(int task) {
    for (auto& s : servers_) {
      if (s->task_name() == "/job:worker/replica:0/task:" + std::to_string(task)) return s.get();
    }
    ADD_FAILURE() << "no worker task " << task;
    return servers_.front().get();
  }

  ClusterSpec spec_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(StoppedServerSession, ANonChiefDoesNotWaitForTheModelOnItsStoppedServer) {
  Server* worker = Worker(1);
  const std::string target = worker->target();
  worker->Stop();
  Model m = BuildModel(spec_, "/job:worker/task:1");
  auto session = MonitoredSession::Create(m.root, target, PatientOptions(m, /*chief=*/false));
  ASSERT_FALSE(session.ok()) << "a session on a stopped server was created";
  EXPECT_TRUE(absl::IsUnavailable(session.status())) << session.status();
  EXPECT_NE(session.status().message().find("in this process has stopped"), std::string::npos) << session.status();
}

TEST_F(StoppedServerSession, AStepOnTheChiefsStoppedServerIsNotRecovered) {
  Server* chief = Worker(0);
  Model m = BuildModel(spec_, "/job:worker/task:0");
  auto session = MonitoredSession::Create(m.root, chief->target(), PatientOptions(m, /*chief=*/true));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {m.train}).ok());
  chief->Stop();
  absl::StatusOr<std::vector<Tensor>> r = (*session)->Run({}, {}, {m.train});
  ASSERT_FALSE(r.ok()) << "a step ran on a stopped server";
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("in this process has stopped"), std::string::npos) << r.status();
  EXPECT_EQ((*session)->recoveries(), 0);
}

}  // namespace
}  // namespace distflow
