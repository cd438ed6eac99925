// in_process_cluster_test: servers that stop while a step runs or while a
// session waits for the cluster, tasks that are missing or start late, and
// the in-process master's path following its server.
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "in_process_cluster_test.h"

namespace distflow {
namespace cluster_test {
namespace {

// A step of many seconds (400 chained 1024^3 MatMuls on a worker, fed from a
// ps variable: 800 GFLOP, many seconds on any machine); the servers are
// destroyed once worker 1 runs its part. The client gets an answer (or an
// error) and every server's destructor returns.
void ShutDownServersWhileAStepIsRunning(bool in_process_master) {
  auto spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok());
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string target;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  Worker* busy = nullptr;  // runs the MatMuls
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:1") busy = s->impl()->worker();
  ASSERT_NE(busy, nullptr);
  Scope root = Scope::NewRootScope();
  auto m = ops::MakeVariable(root.WithDevice("/job:ps/task:0").WithOpName("m"),
                             ops::Fill(root.WithDevice("/job:ps/task:0"), {1024, 1024}, ops::Const(root, 0.001f)));
  auto w1 = root.WithDevice("/job:worker/task:1");
  Output y = ops::MatMul(w1, m, m);
  for (int i = 0; i < 400; ++i) y = ops::MatMul(w1, y, m);
  auto s = ops::Sum(root.WithDevice("/job:worker/task:0"), y, {0, 1});
  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = in_process_master;
  Session sess(target, o);
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  absl::Notification answered;
  absl::Status status;
  std::thread client([&] {
    status = sess.Run({s}).status();  // still running when the servers go
    answered.Notify();
  });
  EXPECT_TRUE(WaitUntil([&] { return busy->running_partitions() > 0; }, absl::Seconds(60))) << "the step never began";
  absl::Time start = absl::Now();
  servers->clear();  // Stop + destroy every server mid-step
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  client.join();
  EXPECT_FALSE(status.ok()) << "the step cannot have finished";
}

TEST(Cluster, ServersShutDownWhileAStepIsRunningOverGrpc) { ShutDownServersWhileAStepIsRunning(false); }
TEST(Cluster, ServersShutDownWhileAnInProcessStepIsRunning) { ShutDownServersWhileAStepIsRunning(true); }

TEST(Cluster, MissingTaskIsUnavailableNamingItAfterTheWait) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE((*worker)->Start().ok());
  Scope root = Scope::NewRootScope();
  auto c = ops::Const(root, 1.f);
  SessionOptions o;
  o.wait_for_cluster_ms = 1500;
  Session sess((*worker)->target(), o);
  auto out = sess.Run({c});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable) << out.status();
  EXPECT_NE(out.status().message().find("/job:ps/replica:0/task:0 at 127.0.0.1:"), std::string::npos) << out.status();
}

TEST(Cluster, DeviceFiltersLetASessionIgnoreMissingTasks) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE((*worker)->Start().ok());
  Scope root = Scope::NewRootScope();
  auto c = ops::Const(root, 3.f);
  SessionOptions o;
  o.wait_for_cluster_ms = 1000;
  o.device_filters = {"/job:worker/task:0"};
  Session sess((*worker)->target(), o);
  auto out = sess.Run({c});
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST(Cluster, StartOrderDoesNotMatterPsThreeSecondsLate) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE((*worker)->Start().ok());
  std::unique_ptr<Server> ps;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    auto s = Server::Create(*spec, "ps", 0);
    if (s.ok() && (*s)->Start().ok()) ps = std::move(*s);
  });
  Scope root = Scope::NewRootScope();
  auto v = ops::MakeVariable(root.WithDevice("/job:ps/task:0").WithOpName("late_var"), ops::Const(root, 5.f));
  auto y = ops::Square(root.WithDevice("/job:worker/task:0"), v);
  SessionOptions o;
  o.wait_for_cluster_ms = 30000;
  Session sess((*worker)->target(), o);
  auto init = sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
  late.join();
  ASSERT_TRUE(init.ok()) << init.status();
  auto out = sess.Run({y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 25.f);
}

TEST(Cluster, PortInUseIsAClearError) {
  auto spec = MakeLocalClusterSpec(1, 0);
  ASSERT_TRUE(spec.ok());
  auto a = Server::Create(*spec, "ps", 0);
  ASSERT_TRUE((*a)->Start().ok());
  auto b = Server::Create(*spec, "ps", 0);
  absl::Status s = (*b)->Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already in use"), std::string::npos) << s;
}

// A server stopped while a client waits in CreateSession for a task that
// never comes stops at once instead of after the (here 5 minute) wait; the
// client gets an error.
void StopServerWhileASessionWaitsForTheCluster(bool in_process_master) {
  auto spec = MakeLocalClusterSpec(1, 1);  // the ps is never started
  ASSERT_TRUE(spec.ok());
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE((*worker)->Start().ok());
  SessionOptions o;
  o.wait_for_cluster_ms = 300000;
  o.in_process_master = in_process_master;
  absl::Status status;
  absl::Notification answered;
  const std::string target = (*worker)->target();  // read here: the server is destroyed below
  std::thread client([&] {
    Session sess(target, o);
    Scope root = Scope::NewRootScope();
    status = sess.Run({ops::Const(root, 1.f)}).status();
    answered.Notify();
  });
  EXPECT_TRUE(WaitUntil([&] { return (*worker)->impl()->master()->sessions_being_created() > 0; }, absl::Seconds(60)))
      << "the session never began waiting for the cluster";
  absl::Time start = absl::Now();
  worker->reset();  // Stop + destroy
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  client.join();
  EXPECT_FALSE(status.ok());
}

TEST(Cluster, StoppingAServerEndsAnInProcessSessionsWaitForTheCluster) {
  StopServerWhileASessionWaitsForTheCluster(true);
}
TEST(Cluster, StoppingAServerEndsARemoteSessionsWaitForTheCluster) { StopServerWhileASessionWaitsForTheCluster(false); }

// While one thread's Run waits for the cluster, another thread goes on
// building the graph, and a Close from a third ends the wait (over gRPC the
// call is cancelled at once).
TEST(Cluster, ARunWaitingForTheClusterBlocksNeitherGraphBuildingNorClose) {
  auto spec = MakeLocalClusterSpec(1, 1);  // the ps is not started
  ASSERT_TRUE(spec.ok());
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE(worker.ok());
  ASSERT_TRUE((*worker)->Start().ok());
  SessionOptions o;
  o.wait_for_cluster_ms = 120000;
  o.in_process_master = false;
  Session sess((*worker)->target(), o);
  Scope root = Scope::NewRootScope();
  auto c = ops::Const(root, 1.f);
  absl::Status status;
  absl::Notification answered;
  std::thread client([&] {
    status = sess.Run({c}).status();
    answered.Notify();
  });
  EXPECT_TRUE(WaitUntil([&] { return (*worker)->impl()->master()->sessions_being_created() > 0; }, absl::Seconds(60)))
      << "the Run never began waiting for the cluster";
  const absl::Time start = absl::Now();
  auto more = ops::Add(root, c, ops::Const(root, 2.f));  // takes the graph's lock
  EXPECT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(more.node() != nullptr);
  EXPECT_TRUE(sess.Close().ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "building the graph or Close waited for the Run";
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30))) << "Close did not end the wait";
  client.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "closed")) << status;
}

// The in-process path follows the server: "localhost" names the server the
// spec calls 127.0.0.1, and once the server stops, the session's calls go
// to the network like any other client's (and fail cleanly, not hang).
TEST(Cluster, InProcessMasterIsFoundByAliasAndLeftWhenTheServerStops) {
  auto spec = MakeLocalClusterSpec(0, 1);
  ASSERT_TRUE(spec.ok());
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server& server = *(*servers)[0];
  std::string alias = "grpc://localhost:" + std::to_string(server.port());
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  auto same = ops::Identity(root, x);
  SessionOptions o;
  o.wait_for_cluster_ms = 5000;
  Session sess(alias, o);
  Tensor big = Tensor::Allocate(DT_FLOAT, TensorShape({int64_t{1} << 19})).value();  // 2 MiB
  for (float& v : big.flat<float>()) v = 1.5f;
  auto out = sess.Run({{x, big}}, {same});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE((*out)[0].SharesBufferWith(big)) << "localhost should reach the in-process master";
  server.Stop();
  absl::Time start = absl::Now();
  auto after = sess.Run({{x, big}}, {same});
  ASSERT_FALSE(after.ok());
  EXPECT_TRUE(absl::IsUnavailable(after.status())) << after.status();
  EXPECT_NE(after.status().message().find(alias.substr(7)), std::string::npos) << after.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace cluster_test
}  // namespace distflow
