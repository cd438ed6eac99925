// Clusters of real gRPC servers inside the test process, driven through
// grpc:// sessions exactly as a user would (the fixture:
// in_process_cluster_test.h). One binary, in_process_cluster_test, of
// several files by theme: here steps across tasks, their traces, variables
// shared between sessions and clients, and large tensors (over the bulk
// ports or inside the messages); in_process_cluster_sessions_test.cc
// (requests a client could send twice, tasks that restart or go down,
// Reset, ListDevices), in_process_cluster_lifecycle_test.cc (servers that
// start late, stop mid-step, or are missing),
// in_process_cluster_bulk_port_test.cc (a crowded bulk port),
// in_process_cluster_limits_test.cc (failure detection, bounded resources).
#include "in_process_cluster_test.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace distflow {
namespace cluster_test {
namespace {

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

TEST_P(ClusterTest, ALargeTensorInATransferBundleTravelsOverTheBulkPort) {
  // Fill's shape is known only at run time, so the partitioner bundles it
  // with the small tensor from the same ps to the same worker; the bundle's
  // answer must still send the large one over the bulk port, not inline.
  const int64_t n = int64_t{4} << 20;
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto w1 = root.WithDevice("/job:worker/task:1");
  auto dims = ops::Placeholder(ps.WithOpName("dims"), DT_INT64);
  auto big = ops::Reshape(ps, ops::Fill(ps, {n}, ops::Const(ps, 0.5f)), dims);
  auto small = ops::Add(ps, ops::Const(ps, Tensor::FromVector<float>({1, 2, 3})),
                        ops::Const(ps, Tensor::FromVector<float>({1, 1, 1})));
  auto sum_big = ops::Sum(w1, big, {0});
  auto sum_small = ops::Sum(w1, small, {0});
  Session sess(Target("worker", 1), Options());
  auto out = sess.Run({{dims, Tensor::FromVector<int64_t>({n})}}, {sum_big, sum_small});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR((*out)[0].scalar<float>(), n * 0.5, n * 0.5 * 1e-3);
  EXPECT_EQ((*out)[1].scalar<float>(), 9.0f);
  uint64_t served = 0;
  for (auto& s : servers_) served += s->impl()->bulk_bytes_served();
  EXPECT_EQ(served, static_cast<uint64_t>(n) * 4) << "only the large tensor travels over the bulk port";
}

// What the ps sends the worker (a large tensor of a shape known only at run
// time and a small one) rides with the ps's fetch of what the worker
// computes from it (a push, placement/transfer_bundles.h): the small one
// inside the call, the large one over the ps's bulk port, fetched by the
// worker; the results are those of the plain transfers.
TEST_P(ClusterTest, TensorsPushedWithAFetchArriveAndTheLargeOnesTakeTheBulkPort) {
  const int64_t n = int64_t{4} << 20;
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto w1 = root.WithDevice("/job:worker/task:1");
  auto dims = ops::Placeholder(ps.WithOpName("dims"), DT_INT64);
  auto big = ops::Reshape(ps, ops::Fill(ps, {n}, ops::Const(ps, 0.5f)), dims);
  auto small = ops::Add(ps, ops::Const(ps, Tensor::FromVector<float>({1, 2, 3})),
                        ops::Const(ps, Tensor::FromVector<float>({1, 1, 1})));
  auto sum_big = ops::Sum(w1, big, {0});
  auto neg_small = ops::Neg(w1, small);
  auto total = ops::Add(ps, sum_big, ops::Sum(ps, neg_small, {0}));
  Session sess(Target("worker", 1), Options());
  for (int step = 0; step < 2; ++step) {
    auto out = sess.Run({{dims, Tensor::FromVector<int64_t>({n})}}, {total});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<float>(), n * 0.5 - 9.0, n * 0.5 * 1e-3);
  }
  uint64_t served = 0;
  for (auto& s : servers_) served += s->impl()->bulk_bytes_served();
  EXPECT_EQ(served, 2 * static_cast<uint64_t>(n) * 4) << "the large tensor travels over the bulk port, each step";
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

}  // namespace
}  // namespace cluster_test
}  // namespace distflow
