// Clusters of real gRPC servers inside the test process (2 ps + 2 workers),
// driven through grpc:// sessions exactly as a user would. The ClusterTest
// cases run twice: with the client calling its in-process master directly,
// and through gRPC as a client in another process would.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "bulk/bulk_transfer.h"
#include "client/graph_state.h"
#include "distflow/distflow.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/master.grpc.pb.h"
#include "server/grpc_server.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

class ClusterTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(2, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto servers = StartLocalCluster(spec_);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
  }
  std::string Target(const std::string& job, int task) {
    for (auto& s : servers_)
      if (s->task_name() == "/job:" + job + "/replica:0/task:" + std::to_string(task)) return s->target();
    return "";
  }
  SessionOptions Options() {
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    o.in_process_master = InProcess();
    return o;
  }
  static bool InProcess() { return GetParam(); }
  // A stub of worker 0's master and a session of `root`'s graph made through
  // it with a raw CreateSession call (for requests the client API never sends).
  std::string RawSession(const Scope& root, std::unique_ptr<proto::MasterService::Stub>* stub) {
    *stub = proto::MasterService::NewStub(
        grpc::CreateChannel(Target("worker", 0).substr(7), grpc::InsecureChannelCredentials()));
    proto::CreateSessionRequest creq;
    root.ToGraphDef(creq.mutable_graph_def());
    proto::CreateSessionResponse cresp;
    grpc::ClientContext ctx;
    grpc::Status s = (*stub)->CreateSession(&ctx, creq, &cresp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return cresp.session_handle();
  }
  ClusterSpec spec_;
  std::vector<std::unique_ptr<Server>> servers_;
};

INSTANTIATE_TEST_SUITE_P(ClientPath, ClusterTest, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& i) {
  return i.param ? "InProcessMaster" : "OverGrpc";
});

// y = x * weights_1 * weights_2: the weights on ps 0 and ps 1, the
// products ("layer1", "layer2") on worker 1.
struct TwoLayers {
  explicit TwoLayers(const Scope& root) {
    auto ps0 = root.WithDevice("/job:ps/task:0");
    auto ps1 = root.WithDevice("/job:ps/task:1");
    auto worker = root.WithDevice("/job:worker/task:1");
    auto w1 = ops::MakeVariable(ps0.WithOpName("weights_1"), ops::Const(ps0, {1, 2, 3, 4}, TensorShape({2, 2})));
    auto w2 = ops::MakeVariable(ps1.WithOpName("weights_2"), ops::Const(ps1, {1, 0, 0, 1}, TensorShape({2, 2})));
    x = ops::Placeholder(worker.WithOpName("x"), DT_FLOAT, PartialShape({-1, 2}));
    y = ops::MatMul(worker.WithOpName("layer2"), ops::MatMul(worker.WithOpName("layer1"), x, w1), w2);
    init = ops::GlobalVariablesInitializer(root);
  }
  Output x, y;
  Operation init;
};

TEST_P(ClusterTest, CrossTaskEdgesComputeOnWorkerWithVariablesOnPs) {
  Scope root = Scope::NewRootScope();
  TwoLayers m(root);
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({}, {}, {m.init});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  auto out = sess.Run({{m.x, Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))}}, {m.y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({4, 6}, TensorShape({1, 2})), (*out)[0]);
}

TEST_P(ClusterTest, ATracedStepReportsEveryTasksNodesWithMatchingTransfers) {
  Scope root = Scope::NewRootScope();
  TwoLayers m(root);
  Session sess(Target("worker", 0), Options());
  {
    auto r_ = sess.Run({}, {}, {m.init});
    ASSERT_TRUE(r_.ok()) << r_.status();
  }
  StepStats trace;
  RunOptions ro;
  ro.trace = &trace;
  const int64_t before = absl::ToUnixMicros(absl::Now());
  auto out = sess.Run({{m.x, Tensor::FromVector<float>({1, 1}, TensorShape({1, 2}))}}, {m.y}, {}, ro);
  const int64_t after = absl::ToUnixMicros(absl::Now());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({4, 6}, TensorShape({1, 2})), (*out)[0]);
  std::map<std::string, std::vector<NodeExecStats>> by_device;
  for (const DeviceStepStats& d : trace.devices) by_device[d.device] = d.nodes;
  // The ps partitions only send: an untraced step answers without waiting
  // for them, a traced one waits to gather their records.
  EXPECT_EQ(by_device.size(), 3u) << "both ps tasks and the worker ran a partition";
  std::map<std::string, int> sends, recvs;
  std::set<std::string> worker_nodes;
  for (const auto& [device, nodes] : by_device) {
    ASSERT_FALSE(nodes.empty()) << device;
    for (const NodeExecStats& n : nodes) {
      EXPECT_LE(before, n.start_us) << n.node;
      EXPECT_LE(n.start_us, n.end_us) << n.node;
      EXPECT_LE(n.end_us, after) << n.node;
      if (n.op == "_Send") ++sends[n.transfer_key];
      if (n.op == "_Recv") ++recvs[n.transfer_key];
      if (absl::StrContains(device, "/job:worker/replica:0/task:1")) worker_nodes.insert(n.node);
    }
  }
  EXPECT_TRUE(worker_nodes.count("layer1") && worker_nodes.count("layer2")) << "the matmuls ran on worker 1";
  EXPECT_EQ(sends.size(), 2u) << "one variable read crosses from each ps";
  EXPECT_EQ(sends, recvs) << "each send's key names its receive";
  // The timeline of it parses as trace-event JSON elsewhere (step_stats_test);
  // here: one track per device.
  std::string json = ChromeTraceJson(trace);
  for (const auto& [device, nodes] : by_device) EXPECT_TRUE(absl::StrContains(json, device));
}

TEST_P(ClusterTest, VariablesPersistAcrossStepsAndSessions) {
  auto build = [](Scope root, Output* counter, Output* incr, Operation* init) {
    auto ps = root.WithDevice("/job:ps/task:1");
    *counter = ops::MakeVariable(ps.WithOpName("counter"), ops::Const(ps, int64_t{0}));
    *incr = ops::AssignAdd(root.WithDevice("/job:worker/task:0"), *counter, ops::Const(ps, int64_t{1}));
    *init = ops::GlobalVariablesInitializer(root);
  };
  {
    Scope root = Scope::NewRootScope();
    Output counter, incr;
    Operation init;
    build(root, &counter, &incr, &init);
    Session s1(Target("worker", 0), Options());
    {
      auto r_ = s1.Run({}, {}, {init});
      ASSERT_TRUE(r_.ok()) << r_.status();
    }
    for (int i = 0; i < 3; ++i) {
      auto r_ = s1.Run({incr});
      ASSERT_TRUE(r_.ok()) << r_.status();
    }
  }
  Scope root = Scope::NewRootScope();
  Output counter, incr;
  Operation init;
  build(root, &counter, &incr, &init);
  Session s2(Target("worker", 1), Options());
  auto out = s2.Run({counter});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 3) << "a new session on another worker sees the ps variable";
}

TEST_P(ClusterTest, TwoClientsShareVariables) {
  {
    Scope root = Scope::NewRootScope();
    auto ps = root.WithDevice("/job:ps/task:0");
    auto v = ops::MakeVariable(ps.WithOpName("shared_total"), ops::Const(ps, 0.f));
    Session s(Target("worker", 0), Options());
    {
      auto r_ = s.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
      ASSERT_TRUE(r_.ok()) << r_.status();
    }
  }
  auto client = [&](int task) {
    Scope root = Scope::NewRootScope();
    auto ps = root.WithDevice("/job:ps/task:0");
    auto v = ops::Variable(ps.WithOpName("shared_total"), PartialShape({}), DT_FLOAT);
    auto add = ops::AssignAdd(root.WithDevice("/job:worker/task:" + std::to_string(task)), v, ops::Const(root, 1.f));
    Session s(Target("worker", task), Options());
    for (int i = 0; i < 20; ++i) {
      auto r_ = s.Run({add});
      EXPECT_TRUE(r_.ok()) << r_.status();
    }
  };
  std::thread a(client, 0), b(client, 1);
  a.join();
  b.join();
  Scope root = Scope::NewRootScope();
  auto v = ops::Variable(root.WithDevice("/job:ps/task:0").WithOpName("shared_total"), PartialShape({}), DT_FLOAT);
  Session s(Target("worker", 1), Options());
  auto out = s.Run({v});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 40.f);
}

TEST_P(ClusterTest, ErrorOnPsReachesClientAndAbortsTheStep) {
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:1");
  auto w = ops::Variable(ps.WithOpName("never_initialized"), PartialShape({2}), DT_FLOAT);
  auto read = ops::Identity(ps.WithOpName("read_on_ps"), w);
  // The worker waits for the ps's tensor; the failure must not leave it waiting.
  auto y = ops::Square(root.WithDevice("/job:worker/task:0"), read);
  Session sess(Target("worker", 0), Options());
  auto out = sess.Run({y});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  std::string m(out.status().message());
  EXPECT_NE(m.find("/job:ps/replica:0/task:1"), std::string::npos) << m;
  EXPECT_NE(m.find("never_initialized"), std::string::npos) << m;
  // The cluster still works afterwards.
  auto ok = sess.Run({ops::Const(root, 1.f)});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_P(ClusterTest, UnknownDeviceIsAClearErrorAndSoftPlacementFixesIt) {
  Scope root = Scope::NewRootScope();
  auto v = ops::Const(root.WithDevice("/job:ps/task:0/device:CPU:1").WithOpName("b"), 1.f);
  {
    Session sess(Target("worker", 0), Options());
    auto out = sess.Run({v});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("Cannot place node 'b'"), std::string::npos) << out.status();
    EXPECT_NE(out.status().message().find("allow_soft_placement"), std::string::npos);
  }
  SessionOptions soft = Options();
  soft.allow_soft_placement = true;
  Session sess(Target("worker", 0), soft);
  auto out = sess.Run({v});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 1.f);
}

TEST_P(ClusterTest, LargeTensorCrossesTasksWithoutSizeLimit) {
  // 256 MiB of float32 made on a ps and reduced on a worker.
  const int64_t n = int64_t{64} << 20;
  Scope root = Scope::NewRootScope();
  auto big = ops::Fill(root.WithDevice("/job:ps/task:0"), {n}, ops::Const(root, 0.5f));
  auto sum = ops::Sum(root.WithDevice("/job:worker/task:1"), big, {0});
  Session sess(Target("worker", 1), Options());
  auto out = sess.Run({sum});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].scalar<float>(), n * 0.5, n * 0.5 * 1e-3);
  uint64_t served = 0;
  for (auto& s : servers_) served += s->impl()->bulk_bytes_served();
  EXPECT_EQ(served, static_cast<uint64_t>(n) * 4) << "the tensor should travel over the bulk port";
}

TEST_P(ClusterTest, LargeFeedsAndFetchesTravelOverTheMastersBulkPort) {
  // A 2M-element float feed (8 MiB) to a placeholder on the worker whose
  // master the client talks to; the doubled tensor comes back as a fetch.
  // In process, nothing crosses a socket and the fed tensor itself reaches
  // the graph (its Identity comes back sharing the client's memory).
  const int64_t n = int64_t{2} << 20;
  Scope root = Scope::NewRootScope();
  auto w = root.WithDevice("/job:worker/task:0");
  auto x = ops::Placeholder(w.WithOpName("x"), DT_FLOAT);
  auto y = ops::Add(w, x, x);
  auto s = ops::Sum(w, y, {0});
  auto same = ops::Identity(w, x);
  Session sess(Target("worker", 0), Options());
  Tensor feed = Tensor::Allocate(DT_FLOAT, TensorShape({n})).value();
  float* p = static_cast<float*>(feed.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 7);
  auto out = sess.Run({{x, feed}}, {y, s, same});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), TensorShape({n}));
  const float* q = static_cast<const float*>((*out)[0].raw_data());
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(q[i], 2.0f * static_cast<float>(i % 7)) << i;
  EXPECT_TENSOR_EQ(feed, (*out)[2]);
  EXPECT_EQ((*out)[2].SharesBufferWith(feed), InProcess());
  Server* master = nullptr;
  for (auto& srv : servers_)
    if (srv->task_name() == "/job:worker/replica:0/task:0") master = srv.get();
  ASSERT_NE(master, nullptr);
  const uint64_t bytes = InProcess() ? 0 : static_cast<uint64_t>(n) * 4;
  EXPECT_EQ(master->impl()->bulk_bytes_received(), bytes) << "the feed arrives over the bulk port unless in process";
  EXPECT_EQ(master->impl()->bulk_bytes_served(), 2 * bytes) << "the fetches leave over the bulk port unless in process";
  // Small tensors still travel inside the messages.
  auto small = sess.Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {s});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)[0].scalar<float>(), 12.0f);
  EXPECT_EQ(master->impl()->bulk_bytes_received(), bytes);
}

TEST_P(ClusterTest, LargeFeedsAndFetchesOfAnotherTaskTravelOverBulkPorts) {
  // The client talks to worker 0's master; the placeholder and the result
  // live on worker 1, so the feed goes client -> master -> worker 1 and the
  // fetch worker 1 -> master -> client, every hop over a bulk port.
  const int64_t n = int64_t{2} << 20;
  Scope root = Scope::NewRootScope();
  auto w1 = root.WithDevice("/job:worker/task:1");
  auto x = ops::Placeholder(w1.WithOpName("x1"), DT_FLOAT);
  auto y = ops::Add(w1, x, x);
  Session sess(Target("worker", 0), Options());
  Tensor feed = Tensor::Allocate(DT_FLOAT, TensorShape({n})).value();
  float* p = static_cast<float*>(feed.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 5);
  auto out = sess.Run({{x, feed}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* q = static_cast<const float*>((*out)[0].raw_data());
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(q[i], 2.0f * static_cast<float>(i % 5)) << i;
  const uint64_t bytes = static_cast<uint64_t>(n) * 4;
  const uint64_t client_bytes = InProcess() ? 0 : bytes;  // in process, client <-> master is memory
  for (auto& srv : servers_) {
    if (srv->task_name() == "/job:worker/replica:0/task:0") {
      EXPECT_EQ(srv->impl()->bulk_bytes_received(), client_bytes) << "the client's feed";
      EXPECT_EQ(srv->impl()->bulk_bytes_served(), bytes + client_bytes)
          << "the feed to worker 1 and the fetch to the client";
    }
    if (srv->task_name() == "/job:worker/replica:0/task:1") {
      EXPECT_EQ(srv->impl()->bulk_bytes_served(), bytes) << "the fetch, read by the master";
    }
  }
}

// GET http://127.0.0.1:port/metrics, the body ("" on failure).
std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t r; (r = read(fd, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(r));
    }
  }
  close(fd);
  return text;
}

// The value of the sample `name{labels}` in a metrics page, -1 if absent.
double MetricValue(const std::string& page, const std::string& sample) {
  const size_t at = page.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(page.c_str() + at + 1 + sample.size() + 1, nullptr);
}

// A worker's pull of a ps tensor on one host: through shared memory by
// default (the ps's bulk port counts it as such, and /metrics says so), over
// TCP with ServerOptions::shared_memory off or DISTFLOW_SHM=0. The tensor is
// the same either way.
TEST(Cluster, APsPullOnOneHostGoesThroughSharedMemoryUnlessTurnedOff) {
  for (const char* how : {"on", "option off", "DISTFLOW_SHM=0"}) {
    SCOPED_TRACE(how);
    const bool shm = std::string(how) == "on";
    if (std::string(how) == "DISTFLOW_SHM=0") setenv("DISTFLOW_SHM", "0", 1);
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok());
    ServerOptions options;
    options.shared_memory = std::string(how) != "option off";
    options.status_port = 0;
    auto servers = StartLocalCluster(*spec, options);
    ASSERT_TRUE(servers.ok()) << servers.status();
    Server* ps = nullptr;
    Server* worker = nullptr;
    for (auto& s : *servers) (s->task_name() == "/job:ps/replica:0/task:0" ? ps : worker) = s.get();
    const int64_t n = (int64_t{3} << 20) + 5;  // 12 MiB and a bit: several rings' worth, not a multiple
    Scope root = Scope::NewRootScope();
    auto ramp = ops::Range(root.WithDevice("/job:ps/task:0"), ops::Const(root, 0.f), ops::Const(root, float(n)),
                           ops::Const(root, 1.f));
    auto pulled = ops::Identity(root.WithDevice("/job:worker/task:0"), ramp);
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    Session sess(worker->target(), o);
    auto out = sess.Run({pulled});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].NumElements(), n);
    const float* q = static_cast<const float*>((*out)[0].raw_data());
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(q[i], static_cast<float>(i)) << i;
    EXPECT_EQ(q[n - 1], static_cast<float>(n - 1));
    const uint64_t bytes = static_cast<uint64_t>(n) * 4;
    EXPECT_EQ(ps->impl()->bulk_bytes_served(), bytes) << "the pull leaves over the ps's bulk port";
    EXPECT_EQ(ps->impl()->bulk_shm_bytes_served(), shm ? bytes : 0u) << "through shared memory iff it is on";
    // As a scraper sees it on the ps's /metrics.
    const std::string page = ScrapeMetrics(ps->status_port());
    const std::string task = "{task=\"/job:ps/replica:0/task:0\"}";
    EXPECT_EQ(MetricValue(page, "distflow_bulk_bytes_served_total" + task), static_cast<double>(bytes)) << page;
    EXPECT_EQ(MetricValue(page, "distflow_bulk_shm_bytes_served_total" + task), shm ? static_cast<double>(bytes) : 0)
        << page;
    unsetenv("DISTFLOW_SHM");
  }
}

TEST(Cluster, LargeFeedToATaskWithoutBulkTransferTravelsInside) {
  // The master (worker 0) has bulk transfer, the ps runs with --bulk_port=-1:
  // a large feed for the ps must go inside the RunGraph message.
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  ServerOptions off;
  off.bulk_port = -1;
  auto ps = Server::Create(*spec, "ps", 0, off);
  auto worker = Server::Create(*spec, "worker", 0);
  ASSERT_TRUE(ps.ok() && worker.ok());
  ASSERT_TRUE((*ps)->Start().ok());
  ASSERT_TRUE((*worker)->Start().ok());
  EXPECT_EQ((*ps)->bulk_port(), 0);
  EXPECT_GT((*worker)->bulk_port(), 0);
  const int64_t n = int64_t{1} << 20;  // 4 MiB
  Scope root = Scope::NewRootScope();
  auto on_ps = root.WithDevice("/job:ps/task:0");
  auto x = ops::Placeholder(on_ps.WithOpName("xps"), DT_FLOAT);
  auto s = ops::Sum(on_ps, x, {0});
  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = false;  // the client's feed crosses the master's bulk port
  Session sess((*worker)->target(), o);
  Tensor feed = Tensor::Allocate(DT_FLOAT, TensorShape({n})).value();
  for (float& v : feed.flat<float>()) v = 0.5f;
  auto out = sess.Run({{x, feed}}, {s});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].scalar<float>(), n * 0.5, n * 0.5 * 1e-3);
  EXPECT_EQ((*worker)->impl()->bulk_bytes_received(), static_cast<uint64_t>(n) * 4) << "client -> master over bulk";
  EXPECT_EQ((*worker)->impl()->bulk_bytes_served(), 0u) << "master -> ps inside the RunGraph message";
}

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

// Where only the cluster spec's ports are open, bulk transfer is turned off
// and large tensors travel inside the gRPC answers.
TEST(Cluster, LargeTensorsCrossTasksWithBulkTransferOff) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  ServerOptions so;
  so.bulk_transfer = false;
  auto servers = StartLocalCluster(*spec, so);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string target;
  for (auto& s : *servers) {
    EXPECT_EQ(s->bulk_port(), 0);
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  }
  const int64_t n = int64_t{3} << 20;  // 12 MiB
  Scope root = Scope::NewRootScope();
  auto big = ops::Fill(root.WithDevice("/job:ps/task:0"), {n}, ops::Const(root, 0.25f));
  auto sum = ops::Sum(root.WithDevice("/job:worker/task:0"), big, {0});
  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  Session sess(target, o);
  auto out = sess.Run({sum, big});  // the 12 MiB tensor itself comes back too
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].scalar<float>(), n * 0.25, n * 0.25 * 1e-3);
  ASSERT_EQ((*out)[1].shape(), TensorShape({n}));
  EXPECT_EQ((*out)[1].flat<float>()[n - 1], 0.25f);
}

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

// A connection to the bulk port at 127.0.0.1:`port` from `source` (any
// 127.x.y.z address) that says hello (the cluster has no token) and then
// nothing, or, if `busy`, starts a put of 16 bytes and sends only 8, so its
// server thread waits in the middle of a request. -1 on failure.
int HoggingBulkConnection(const std::string& source, int port, bool busy) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char hello[12] = {'D', 'F', 'B', 'H', 1, 0, 0, 0, 0, 0, 0, 0};
  // "DFBP", version 1, 16 bytes follow; then 8 of them.
  const char put[24] = {'D', 'F', 'B', 'P', 1, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0};
  char answer = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
      send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello)) ||
      recv(fd, &answer, 1, 0) != 1 || answer != 1 ||
      (busy && send(fd, put, sizeof(put), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(put)))) {
    close(fd);
    return -1;
  }
  return fd;
}

// A cluster of 1 ps and 1 worker whose ps's bulk port is then given
// BulkServer::kMaxConnections connections from four loopback addresses (each
// address's whole share), idle or busy. Reading a 2 MiB variable of the ps
// on the worker crosses over that port if it can.
class BulkPortCrowded : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto servers = StartLocalCluster(*spec);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (auto& s : servers_) (s->task_name() == "/job:ps/replica:0/task:0" ? ps_ : worker_) = s.get();
    ASSERT_GT(ps_->bulk_port(), 0);
    Scope on_ps = root_.WithDevice("/job:ps/task:0");
    auto w = ops::MakeVariable(on_ps.WithOpName("w"), ops::Fill(on_ps, {512, 1024}, ops::Const(on_ps, 0.5f)));
    read_ = ops::Identity(root_.WithDevice("/job:worker/task:0"), w);
    auto init = ops::GlobalVariablesInitializer(root_);
    sess_ = std::make_unique<Session>(worker_->target());
    auto r = sess_->Run({}, {}, {init});
    ASSERT_TRUE(r.ok()) << r.status();
    rlimit lim{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 8192);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
    ASSERT_GE(lim.rlim_cur, 4096u) << "cannot open enough descriptors for this test";
  }
  void TearDown() override {
    for (int fd : hog_) close(fd);
  }
  void Crowd(bool busy) {
    BulkServer* bulk = ps_->impl()->worker()->bulk_server();
    for (int i = 0; i < BulkServer::kMaxConnections + 8; ++i) {
      if (i == BulkServer::kMaxConnections && busy) {
        // The server marks a connection busy when it has read its request;
        // until then it would count as idle and could be evicted.
        const absl::Time deadline = absl::Now() + absl::Seconds(30);
        while (bulk->NumBusyConnectionsForTest() < static_cast<size_t>(BulkServer::kMaxConnections) &&
               absl::Now() < deadline) {
          absl::SleepFor(absl::Milliseconds(10));
        }
        ASSERT_EQ(bulk->NumBusyConnectionsForTest(), static_cast<size_t>(BulkServer::kMaxConnections));
      }
      const std::string source = absl::StrCat("127.0.0.", 2 + i / BulkServer::kMaxConnectionsPerPeer);
      int fd = HoggingBulkConnection(source, ps_->bulk_port(), busy);
      if (fd < 0 && busy && i >= BulkServer::kMaxConnections) continue;  // refused: every slot is busy
      ASSERT_GE(fd, 0) << "connection " << i << " from " << source;
      hog_.push_back(fd);
    }
    EXPECT_EQ(bulk->evictions(), busy ? 0u : 8u) << "idle connections make room; busy ones do not";
  }
  // Reads the variable on the worker; returns the bytes the ps's bulk port served meanwhile.
  uint64_t ReadAcross() {
    BulkServer* bulk = ps_->impl()->worker()->bulk_server();
    const uint64_t before = bulk->bytes_served();
    auto out = sess_->Run({read_});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    EXPECT_EQ((*out)[0].NumElements(), 512 * 1024);
    EXPECT_EQ((*out)[0].flat<float>()[0], 0.5f);
    EXPECT_EQ((*out)[0].flat<float>()[512 * 1024 - 1], 0.5f);
    return bulk->bytes_served() - before;
  }
  std::vector<std::unique_ptr<Server>> servers_;
  Server* ps_ = nullptr;
  Server* worker_ = nullptr;
  Scope root_ = Scope::NewRootScope();
  Output read_;
  std::unique_ptr<Session> sess_;
  std::vector<int> hog_;
};

// Idle connections in every slot (the issue's ~1,000 idle connections that
// made every large transfer fail): the oldest is closed for the worker's
// connection, and the tensor still crosses over the bulk port.
TEST_F(BulkPortCrowded, IdleConnectionsAreClosedToLetATransferThrough) {
  Crowd(/*busy=*/false);
  EXPECT_EQ(ReadAcross(), uint64_t{512 * 1024 * 4});
}

// Every slot busy in the middle of a request: the worker's connection is
// refused, and the step gets the tensor over gRPC instead of failing.
TEST_F(BulkPortCrowded, BusySlotsMakeTheTransferFallBackToGrpc) {
  Crowd(/*busy=*/true);
  EXPECT_EQ(ReadAcross(), 0u) << "nothing over the bulk port: it had no room";
}

// A step that waits, on `barrier_task`, at a sync barrier no other replica
// reaches (for up to a minute), run from `client_task`'s master; worker 1
// then goes silent. Returns the step's status.
// With `consumer_device`, the step fetches an Identity of the barrier's
// output placed there (a partition receiving from the barrier's).
absl::Status StepWaitingWhileWorker1GoesSilent(int client_task, const std::string& barrier_device,
                                               const std::string& consumer_device = "") {
  auto spec = MakeLocalClusterSpec(1, 2);
  if (!spec.ok()) return spec.status();
  ServerOptions options;
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 400;
  options.orphan_grace_ms = -1;
  options.stall_log_ms = 200;
  options.bulk_transfer = false;
  auto servers = StartLocalCluster(*spec, options);
  if (!servers.ok()) return servers.status();
  Server& client = *(*servers)[1 + client_task];
  Server& w1 = *(*servers)[2];
  // A step of the chief's with a partition on worker 1 that waits (a sync
  // barrier no other replica reaches, for up to a minute).
  Scope root = Scope::NewRootScope();
  Scope on_w1 = root.WithDevice(barrier_device);
  auto step = ops::Const(on_w1, int64_t{0});
  auto wait = ops::Raw(on_w1, "SyncBarrierWait", {step},
                       ops::Attrs{{"shared_name", "barrier"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 2},
                                  {"total_num_replicas", 2},
                                  {"timeout_ms", 60000}});
  if (!root.ok()) return root.status();
  Session session(client.target());
  absl::Notification done;
  absl::Status result;
  std::thread runner([&] {
    Output fetch(wait, 0, on_w1);
    if (!consumer_device.empty()) fetch = ops::Identity(root.WithDevice(consumer_device), fetch);
    auto r = session.Run({fetch});
    result = r.status();
    done.Notify();
  });
  // Once the step waits at the barrier, silence worker 1.
  Worker* barrier_worker = (*servers)[barrier_device == "/job:ps/task:0" ? 0 : 2]->impl()->worker();
  WaitUntil([&] { return barrier_worker->running_partitions() > 0 || done.HasBeenNotified(); }, absl::Seconds(20));
  // Worker 1 reports a stalled step on its own heartbeat, so it keeps
  // beating until the step is older than stall_log_ms plus two beats.
  absl::SleepFor(absl::Milliseconds(options.stall_log_ms + 2 * options.heartbeat_interval_ms));
  EXPECT_FALSE(done.HasBeenNotified()) << result;
  if (done.HasBeenNotified()) {
    runner.join();
    return result;
  }
  w1.impl()->coordination()->Stop(/*leaving=*/false);
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20))) << "the step still waits on the dead task";
  runner.join();
  return result;
}

TEST(FailureDetection, AStepWaitingOnATaskThatStoppedAnsweringFailsNamingIt) {
  // The chief's step has a partition on worker 1, which goes silent.
  testing::internal::CaptureStderr();
  absl::Status s = StepWaitingWhileWorker1GoesSilent(0, "/job:worker/task:1", "/job:ps/task:0");
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // Before it failed, the stalled step said what it waited for: the master
  // the partition on the ps, the ps its receive from worker 1, and worker 1
  // the send its barrier has not made.
  EXPECT_TRUE(absl::StrContains(log, "waiting for the partitions on /job:ps/replica:0/task:0")) << log;
  EXPECT_TRUE(absl::StrContains(log, "from /job:worker/replica:0/task:1")) << log;
  EXPECT_TRUE(absl::StrContains(log, "/job:ps/replica:0/task:0/device:CPU:0 (not sent yet)")) << log;
  EXPECT_TRUE(absl::StrContains(s.message(), "/job:worker/replica:0/task:1 stopped answering")) << s;
}

TEST(FailureDetection, TheParameterServerAbortsTheStepsOfAClientDeclaredDead) {
  // Worker 1's own step waits on the ps; worker 1 is declared dead (as when
  // it is cut off), so the ps ends that step's partition instead of keeping
  // it (and its receives) forever.
  absl::Status s = StepWaitingWhileWorker1GoesSilent(1, "/job:ps/task:0");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[/job:ps/replica:0/task:0]")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "/job:worker/replica:0/task:1 stopped answering")) << s;
}

// ---- Bounded resources: what one client may take from a task.

// A Fill of rows x 1000 floats placed on `device`.
Output FillOn(const Scope& root, const std::string& device, int rows, const std::string& name) {
  Scope s = root.WithDevice(device);
  auto dims = ops::Const(s, Tensor::FromVector<int32_t>({rows, 1000}, TensorShape({2})));
  auto fill = ops::Raw(s.WithOpName(name), "Fill", {dims, ops::Const(s, 1.0f)}, ops::Attrs{});
  return Output(fill, 0, s);
}

TEST(Limits, AStepThatWouldAllocateTooMuchFailsNamingTheNodeAndTheLimit) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.worker.max_step_bytes = 1 << 20;  // 1 MiB a step
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  Output small = FillOn(root, "/job:ps/task:0", 100, "small");  // 400 KB
  Output huge = FillOn(root, "/job:ps/task:0", 1000, "huge");   // 4 MB
  ASSERT_TRUE(root.ok()) << root.status();
  Session session((*servers)[1]->target());
  auto r = session.Run({huge});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "Node 'huge'")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "/job:ps/replica:0/task:0")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--max_step_bytes")) << r.status();
  // The task and the session go on serving steps within the limit.
  auto ok = session.Run({small});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].NumElements(), 100 * 1000);
}

TEST(Limits, TheStepLimitCountsWhatOutputsHoldNotWhatWasEverAllocated) {
  // Six 400 KB outputs in a chain (2.4 MB in all), each freed once the next
  // is computed: never more than 800 KB at once, under a 1 MiB limit.
  Scope root = Scope::NewRootScope();
  Output x = FillOn(root, "", 100, "x0");
  for (int k = 1; k < 6; ++k) x = ops::Add(root.WithOpName("x" + std::to_string(k)), x, ops::Const(root, 1.0f));
  SessionOptions so;
  so.max_step_bytes = 1 << 20;
  so.inter_op_threads = 1;
  Session session("", so);
  auto r = session.Run({x});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].flat<float>()[0], 6.0f);
}

TEST(Limits, ALocalSessionHonoursItsStepLimit) {
  Scope root = Scope::NewRootScope();
  Output huge = FillOn(root, "", 1000, "huge");
  SessionOptions so;
  so.max_step_bytes = 1 << 20;
  Session session("", so);
  auto r = session.Run({huge});
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  Session unlimited;
  EXPECT_TRUE(unlimited.Run({huge}).ok());
}

TEST(Limits, ATaskHoldsAtMostMaxSessionsSessions) {
  auto spec = MakeLocalClusterSpec(0, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.max_sessions = 2;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  auto one = ops::Const(root, 1.0f);
  const std::string target = (*servers)[0]->target();
  Session a(target), b(target), c(target);
  ASSERT_TRUE(a.Run({one}).ok());
  ASSERT_TRUE(b.Run({one}).ok());
  auto r = c.Run({one});
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--max_sessions")) << r.status();
  // Closing one makes room.
  ASSERT_TRUE(a.Close().ok());
  Session d(target);
  EXPECT_TRUE(d.Run({one}).ok());
}

TEST(Limits, ATaskRunsAtMostMaxConcurrentStepsPartitions) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.worker.max_concurrent_steps = 1;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  // A partition on the ps that waits (a barrier nobody releases) for 3 s.
  auto wait = ops::Raw(on_ps, "SyncBarrierWait", {ops::Const(on_ps, int64_t{0})},
                       ops::Attrs{{"shared_name", "limits"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 1},
                                  {"total_num_replicas", 1},
                                  {"timeout_ms", 3000}});
  auto other = ops::Identity(on_ps, ops::Const(on_ps, 2.0f));
  ASSERT_TRUE(root.ok()) << root.status();
  const std::string target = (*servers)[1]->target();
  Session waiting(target), second(target);
  ASSERT_TRUE(second.Run({other}).ok());
  absl::Status waited;
  std::thread blocked([&] { waited = waiting.Run({Output(wait, 0, on_ps)}).status(); });
  Worker* ps = (*servers)[0]->impl()->worker();
  WaitUntil([&] { return ps->running_partitions() > 0; }, absl::Seconds(10));
  // While it runs, the ps refuses a second partition.
  absl::Status refused = second.Run({other}).status();
  blocked.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "--max_concurrent_steps")) << refused;
  // Once it ended, the ps serves again. The ps counts the partition as ended
  // just after it answers, so the answer can reach the client first: wait
  // for the count, not for the answer.
  WaitUntil([&] { return ps->running_partitions() == 0; }, absl::Seconds(10));
  EXPECT_TRUE(second.Run({other}).ok());
}

}  // namespace
}  // namespace distflow
