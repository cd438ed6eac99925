// in_process_cluster_test: what a session's requests do to the cluster: a
// RunStep sent twice runs once, a step with nothing to run does not outlive
// its session, a restarted or stopped task is named, Reset and ListDevices
// reach every task, and device placement is logged.
#include <algorithm>
#include <memory>
#include <string>

#include "in_process_cluster_test.h"

namespace distflow {
namespace cluster_test {
namespace {

TEST_P(ClusterTest, RetriedRunStepIsNotExecutedTwice) {
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto c = ops::MakeVariable(ps.WithOpName("dedupe_counter"), ops::Const(ps, int64_t{0}));
  auto incr = ops::AssignAdd(ps, c, ops::Const(ps, int64_t{1}));
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  {
    auto r_ = sess.Run({incr});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }  // creates the master session's plan
  // Send the same RunStep twice with one request id, as a client retry would.
  std::unique_ptr<proto::MasterService::Stub> stub;
  proto::RunStepRequest req;
  req.set_session_handle(RawSession(root, &stub));
  req.add_target(incr.op().name());
  req.set_request_id(12345);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    proto::RunStepResponse resp;
    ASSERT_TRUE(stub->RunStep(&ctx, req, &resp).ok());
  }
  auto out = sess.Run({c});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 2) << "1 from the session + 1 from the twice-sent request";
}

// Found by the rpc_request fuzzer: a RunStep that names nothing to fetch or
// run has no partitions; it used to stay registered as a running step
// forever, so closing its session waited 30 s for it (and each such request
// left an entry behind).
TEST_P(ClusterTest, AStepWithNothingToRunDoesNotOutliveItsSession) {
  Scope root = Scope::NewRootScope();
  auto v = ops::Const(root.WithDevice("/job:ps/task:0"), 2.f);
  ops::Square(root.WithDevice("/job:worker/task:0"), v);
  std::unique_ptr<proto::MasterService::Stub> stub;
  const std::string handle = RawSession(root, &stub);
  proto::RunStepRequest req;
  req.set_session_handle(handle);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    proto::RunStepResponse resp;
    grpc::Status s = stub->RunStep(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.tensor_size(), 0);
  }
  proto::CloseSessionRequest close;
  close.set_session_handle(handle);
  proto::CloseSessionResponse close_resp;
  grpc::ClientContext c2;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(stub->CloseSession(&c2, close, &close_resp).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "nothing was running";
}

TEST_P(ClusterTest, RestartedTaskIsDetected) {
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto v = ops::Const(ps.WithOpName("on_ps"), 2.f);
  auto y = ops::Square(root.WithDevice("/job:worker/task:0"), v);
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({y});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  // Restart ps 0 on the same address.
  for (auto& s : servers_) {
    if (s->task_name() == "/job:ps/replica:0/task:0") {
      s->Stop();
      auto again = Server::Create(s->cluster(), "ps", 0);
      ASSERT_TRUE(again.ok());
      ASSERT_TRUE((*again)->Start().ok());
      s = std::move(*again);
    }
  }
  auto out = sess.Run({y});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("restarted"), std::string::npos) << out.status();
}

// A task that goes down mid-training fails the step with an error naming
// that task; a client over gRPC must not mistake it for its master being
// unreachable (and neither path may hang).
TEST_P(ClusterTest, StepOnATaskThatWentDownNamesTheTask) {
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:1");
  auto v = ops::Const(ps.WithOpName("on_ps1"), 3.f);
  auto y = ops::Square(root.WithDevice("/job:worker/task:0"), v);
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({y});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  for (auto& s : servers_)
    if (s->task_name() == "/job:ps/replica:0/task:1") s->Stop();
  absl::Time start = absl::Now();
  auto out = sess.Run({y});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("/job:ps/replica:0/task:1"), std::string::npos) << out.status();
  EXPECT_EQ(out.status().message().find("master"), std::string::npos) << out.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
}

TEST_P(ClusterTest, ResetClearsContainersOnEveryTask) {
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:1");
  auto v = ops::MakeVariable(ps.WithOpName("to_reset"), ops::Const(ps, 7.f));
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  ASSERT_TRUE(sess.Run({v}).ok());
  ASSERT_TRUE(sess.Reset().ok());
  auto after = sess.Run({v});
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("uninitialized variable 'to_reset'"), std::string::npos) << after.status();
}

TEST_P(ClusterTest, ListDevicesReportsEveryTask) {
  auto channel = grpc::CreateChannel(Target("ps", 0).substr(7), grpc::InsecureChannelCredentials());
  auto stub = proto::MasterService::NewStub(channel);
  grpc::ClientContext ctx;
  proto::ListDevicesRequest req;
  proto::ListDevicesResponse resp;
  ASSERT_TRUE(stub->ListDevices(&ctx, req, &resp).ok());
  std::vector<std::string> names;
  for (const auto& d : resp.devices()) names.push_back(d.name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
                       "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"}));
}

TEST_P(ClusterTest, LogDevicePlacementPrintsEveryNode) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root.WithDevice("/job:ps/task:0").WithOpName("logged_a"), 1.f);
  auto b = ops::Square(root.WithOpName("logged_b"), a);
  SessionOptions o = Options();
  o.log_device_placement = true;
  Session sess(Target("worker", 1), o);
  testing::internal::CaptureStderr();
  auto out = sess.Run({b});
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(log.find("logged_a: (Const) -> /job:ps/replica:0/task:0/device:CPU:0"), std::string::npos) << log;
  EXPECT_NE(log.find("logged_b: (Square) -> /job:worker/replica:0/task:1/device:CPU:0"), std::string::npos) << log;
}

}  // namespace
}  // namespace cluster_test
}  // namespace distflow
