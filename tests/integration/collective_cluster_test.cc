// Collectives between real servers inside the test process: each worker
// runs its own grpc:// session (between-graph, as an all-reduce program
// does), so every byte between ranks goes through the workers' transport
// (RecvTensor over gRPC, large parts over the bulk port).
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "subprocess.h"
#include "worker_cluster.h"

namespace distflow {
namespace {

class CollectiveClusterTest : public ::testing::Test, public cluster_test::WorkerCluster {};

// Small (direct exchange) and large (ring, parts over the bulk port)
// tensors, summed and averaged across three workers' sessions.
TEST_F(CollectiveClusterTest, ThreeWorkersAllReduce) {
  constexpr int kWorkers = 3;
  Start(kWorkers);
  for (int64_t count : {int64_t{5}, int64_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    std::vector<Tensor> sums(kWorkers), means(kWorkers);
    std::vector<absl::Status> status(kWorkers);
    OnEveryWorker(kWorkers, [&](int task) {
      Scope root = Scope::NewRootScope();
      Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
      Tensor x(DT_FLOAT, TensorShape({count}));
      for (int64_t i = 0; i < count; ++i) x.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(i % 100 + task);
      Output in = ops::Const(s, x);
      auto reduce = [&](const char* final_op, int64_t instance) {
        return Output(ops::Raw(s, "CollectiveReduce", {in},
                               {{"group_size", kWorkers},
                                {"group_key", 1},
                                {"instance_key", instance},
                                {"merge_op", "Add"},
                                {"final_op", final_op}}),
                      0, s);
      };
      Output sum = reduce("Id", 1), mean = reduce("Div", 2);
      std::unique_ptr<Session> sess = SessionOf(task);
      absl::StatusOr<std::vector<Tensor>> out = sess->Run({sum, mean});
      status[static_cast<size_t>(task)] = out.status();
      if (out.ok()) {
        sums[static_cast<size_t>(task)] = (*out)[0];
        means[static_cast<size_t>(task)] = (*out)[1];
      }
    });
    for (int task = 0; task < kWorkers; ++task) {
      ASSERT_TRUE(status[static_cast<size_t>(task)].ok())
          << "worker " << task << ": " << status[static_cast<size_t>(task)];
      auto sum = sums[static_cast<size_t>(task)].flat<float>();
      auto mean = means[static_cast<size_t>(task)].flat<float>();
      ASSERT_EQ(sum.size(), static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(3 * (i % 100) + 0 + 1 + 2);
        ASSERT_EQ(sum[static_cast<size_t>(i)], want) << "worker " << task << " [" << i << "]";
        ASSERT_EQ(mean[static_cast<size_t>(i)], want / 3) << "worker " << task << " [" << i << "]";
      }
    }
  }
}

// A traced step shows each rank's collective phases inside its
// CollectiveReduce (the ring's reduce-scatter and all-gather, one segment
// after another), and a scraper of /metrics sees the run's bytes and time.
TEST_F(CollectiveClusterTest, ATracedReductionShowsItsPhasesAndMetricsCountItsBytes) {
  constexpr int kWorkers = 3;
  constexpr int64_t kCount = int64_t{1} << 16;  // 256 KiB: the ring
  ServerOptions options;
  options.status_port = 0;
  Start(kWorkers, options);
  const int port = ServerOf(0)->status_port();
  ASSERT_GT(port, 0);
  auto sample = [](const std::string& page, const std::string& name, const std::string& labels) {
    return subprocess::MetricValue(page, absl::StrCat(name, "{", labels, "}"));
  };
  const std::string before = subprocess::ScrapeMetrics(port);
  std::vector<StepStats> traces(kWorkers);
  std::vector<absl::Status> status(kWorkers);
  OnEveryWorker(kWorkers, [&](int task) {
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
    Tensor x(DT_FLOAT, TensorShape({kCount}));
    for (int64_t i = 0; i < kCount; ++i) x.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(i % 5 + task);
    Output sum(
        ops::Raw(
            s.WithOpName("allreduce_0"), "CollectiveReduce", {ops::Const(s, x)},
            {{"group_size", kWorkers}, {"group_key", 1}, {"instance_key", 1}, {"merge_op", "Add"}, {"final_op", "Id"}}),
        0, s);
    RunOptions run;
    run.trace = &traces[static_cast<size_t>(task)];
    absl::StatusOr<std::vector<Tensor>> out = SessionOf(task)->Run({}, {sum}, {}, run);
    status[static_cast<size_t>(task)] = out.status();
    if (out.ok() && (*out)[0].flat<float>()[1] != 3 * 1 + (0 + 1 + 2)) {
      status[static_cast<size_t>(task)] = absl::InternalError(absl::StrCat("sum[1] = ", (*out)[0].flat<float>()[1]));
    }
  });
  for (int task = 0; task < kWorkers; ++task) {
    ASSERT_TRUE(status[static_cast<size_t>(task)].ok())
        << "worker " << task << ": " << status[static_cast<size_t>(task)];
    const StepStats& trace = traces[static_cast<size_t>(task)];
    const NodeExecStats* op = nullptr;
    std::vector<const NodeExecStats*> phases;
    std::string device;
    for (const DeviceStepStats& d : trace.devices) {
      for (const NodeExecStats& n : d.nodes) {
        if (n.op == "CollectiveReduce") op = &n;
        if (n.op == "CollectivePhase") {
          phases.push_back(&n);
          device = d.device;
        }
      }
    }
    ASSERT_NE(op, nullptr) << "worker " << task;
    ASSERT_FALSE(phases.empty()) << "worker " << task << " traced no phase";
    EXPECT_TRUE(absl::StrContains(device, absl::StrCat("/job:worker/replica:0/task:", task))) << device;
    bool scatter = false, gather = false;
    for (size_t i = 0; i < phases.size(); ++i) {
      const NodeExecStats& p = *phases[i];
      ASSERT_TRUE(absl::StartsWith(p.node, "allreduce_0:")) << p.node;
      scatter |= absl::StrContains(p.node, ":reduce-scatter ");
      gather |= absl::StrContains(p.node, ":all-gather ");
      EXPECT_LT(p.start_us, p.end_us) << p.node;
      EXPECT_GE(p.start_us, op->start_us) << p.node << " starts inside its op";
      EXPECT_LE(p.end_us, op->end_us) << p.node << " ends inside its op";
      if (i > 0) {
        EXPECT_EQ(p.start_us, phases[i - 1]->end_us) << p.node << " follows the phase before";
      }
    }
    EXPECT_TRUE(scatter && gather) << "worker " << task << ": the ring's two phases";
    EXPECT_TRUE(absl::StrContains(ChromeTraceJson(trace), R"("cat":"Collective")")) << "drawn in the Chrome trace";
  }
  // The servers share this process's registry: three ranks' worth. Each ring
  // step every rank sends one segment (together the whole tensor), 2(n-1)
  // steps; shape checks' signatures add a few bytes.
  const std::string after = subprocess::ScrapeMetrics(port);
  const std::string reduce = R"(op="reduce")";
  auto delta = [&](const std::string& name, const std::string& labels) {
    return sample(after, name, labels) - std::max(0.0, sample(before, name, labels));
  };
  const double payload = 2.0 * (kWorkers - 1) * kCount * 4;
  const double sent = delta("distflow_collective_bytes_sent_total", reduce);
  EXPECT_GE(sent, payload) << after;
  EXPECT_LT(sent, payload + 4096) << after;
  EXPECT_EQ(delta("distflow_collective_bytes_received_total", reduce), sent) << after;
  EXPECT_EQ(delta("distflow_collective_runs_total", R"(op="reduce",status="ok")"), kWorkers) << after;
  EXPECT_GT(delta("distflow_collective_seconds_total", reduce), 0) << after;
}

// A group across jobs (group_tasks): a ps task and a worker reduce together
// on real servers, each in its own session, and the ranks follow the list's
// order; a task the cluster does not have, and a task outside the list, fail
// naming it; a list that is not of task names is refused when the graph is
// built.
TEST_F(CollectiveClusterTest, AGroupOfTasksOfTwoJobsReducesTogether) {
  Start(2, {}, /*ps=*/1);
  const std::vector<std::string> members = {"/job:worker/task:1", "/job:ps/task:0"};  // rank 0, rank 1
  auto run = [&](const std::string& task, const std::vector<std::string>& group, float value, int64_t instance) {
    // "/job:ps/task:0" is the server of "/job:ps/replica:0/task:0".
    const std::string job = task.substr(5, task.find('/', 1) - 5);
    const int index = std::stoi(task.substr(task.find("/task:") + 6));
    Server* server = nullptr;
    for (auto& s : servers_)
      if (s->task_name() == TaskName(job, index)) server = s.get();
    if (server == nullptr) return absl::StatusOr<std::vector<Tensor>>(absl::NotFoundError(task));
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDevice(task);
    Output in = ops::Const(s, Tensor::FromVector<float>({value, 2 * value}));
    Output sum(ops::Raw(s, "CollectiveReduce", {in},
                        {{"group_size", static_cast<int64_t>(group.size())},
                         {"group_key", 7},
                         {"instance_key", instance},
                         {"merge_op", "Add"},
                         {"final_op", "Id"},
                         {"timeout_seconds", 20.0},
                         {"group_tasks", group}}),
               0, s);
    Output gather(ops::Raw(s, "CollectiveGather", {in},
                           {{"group_size", static_cast<int64_t>(group.size())},
                            {"group_key", 7},
                            {"instance_key", instance + 1},
                            {"timeout_seconds", 20.0},
                            {"group_tasks", group}}),
                  0, s);
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    o.device_filters = {task};
    return Session(server->target(), o).Run({sum, gather});
  };
  std::vector<absl::StatusOr<std::vector<Tensor>>> out(2, absl::UnknownError("did not run"));
  std::thread ps([&] { out[1] = run("/job:ps/task:0", members, 10, 1); });
  out[0] = run("/job:worker/task:1", members, 1, 1);
  ps.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << out[static_cast<size_t>(r)].status();
    const std::vector<Tensor>& t = *out[static_cast<size_t>(r)];
    EXPECT_EQ(t[0].flat<float>()[0], 11.f) << "rank " << r;
    EXPECT_EQ(t[0].flat<float>()[1], 22.f) << "rank " << r;
    ASSERT_EQ(t[1].NumElements(), 4);
    EXPECT_EQ(t[1].flat<float>()[0], 1.f) << "the worker is rank 0: its part comes first";
    EXPECT_EQ(t[1].flat<float>()[2], 10.f) << "the ps is rank 1";
  }
  // A task the cluster does not have.
  absl::StatusOr<std::vector<Tensor>> unknown = run("/job:ps/task:0", {"/job:ps/task:0", "/job:ps/task:5"}, 1, 10);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "/job:ps/task:5")) << unknown.status();
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "does not have")) << unknown.status();
  absl::StatusOr<std::vector<Tensor>> no_job = run("/job:ps/task:0", {"/job:ps/task:0", "/job:eval/task:0"}, 1, 20);
  ASSERT_FALSE(no_job.ok());
  EXPECT_TRUE(absl::StrContains(no_job.status().message(), "no job 'eval'")) << no_job.status();
  // A task that runs the op but is not in the list.
  absl::StatusOr<std::vector<Tensor>> outside =
      run("/job:worker/task:0", {"/job:ps/task:0", "/job:worker/task:1"}, 1, 30);
  ASSERT_FALSE(outside.ok());
  EXPECT_TRUE(absl::StrContains(outside.status().message(), "is not in the group")) << outside.status();
  // Not task names, or a length other than group_size: refused when built.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"ps0", "/job:worker/task:1"}, std::vector<std::string>{"/job:ps/task:0"}}) {
    Scope root = Scope::NewRootScope();
    ops::Raw(root, "CollectiveReduce", {ops::Const(root, 1.f)},
             {{"group_size", 2},
              {"group_key", 1},
              {"instance_key", 1},
              {"merge_op", "Add"},
              {"final_op", "Id"},
              {"group_tasks", bad}});
    ASSERT_FALSE(root.ok()) << bad[0];
    EXPECT_TRUE(absl::StrContains(root.status().message(), bad.size() == 1 ? "group_tasks lists 1 task(s)" : "'ps0'"))
        << root.status();
  }
}

// A program that ends right after a failed collective destroys its server
// while the group's rebuild still polls the coordinator through the
// server's coordination agent: the server ends the rebuild before it tears
// the agent down (CollectiveExecutorImpl::Shutdown), and the coordinator's
// task goes on serving.
TEST_F(CollectiveClusterTest, AServerDestroyedWhileItsGroupIsBeingRebuiltStopsCleanly) {
  Start(2);
  auto reduce = [](const Scope& s, int64_t group_size, double timeout) {
    return Output(ops::Raw(s, "CollectiveReduce", {ops::Const(s, Tensor::FromVector<float>({1, 2}))},
                           {{"group_size", group_size},
                            {"group_key", 1 + group_size},
                            {"instance_key", 1},
                            {"merge_op", "Add"},
                            {"final_op", "Id"},
                            {"timeout_seconds", timeout}}),
                  0, s);
  };
  {
    Scope root = Scope::NewRootScope();
    // Worker 0 never joins: the run times out and the group must be rebuilt,
    // which waits at the coordinator (worker 0) for worker 0 to ask.
    absl::StatusOr<std::vector<Tensor>> out =
        SessionOf(1)->Run({reduce(root.WithDevice("/job:worker/task:1"), 2, 0.3)});
    ASSERT_FALSE(out.ok()) << "worker 1 reduced without worker 0";
    EXPECT_TRUE(absl::StrContains(out.status().message(), "rank 0 (/job:worker/replica:0/task:0)")) << out.status();
  }
  StopWorker(1);  // the rebuild is still asking
  Scope root = Scope::NewRootScope();
  absl::StatusOr<std::vector<Tensor>> alone = SessionOf(0)->Run({reduce(root.WithDevice("/job:worker/task:0"), 1, 0)});
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ((*alone)[0].flat<float>()[1], 2.0f);
}

// The cluster token holds for collectives as for every RecvTensor: with the
// same token on every task the reduce works; a task whose token differs is
// refused, and both ranks fail naming the other instead of waiting.
TEST_F(CollectiveClusterTest, TheClusterTokenHoldsForCollectives) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(0, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  for (const bool same : {true, false}) {
    SCOPED_TRACE(same ? "same token" : "different tokens");
    servers_.clear();
    for (int t = 0; t < 2; ++t) {
      ServerOptions o;
      o.auth_token = same || t == 0 ? "token-of-the-cluster" : "another-token";
      absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(*spec, "worker", t, o);
      ASSERT_TRUE(server.ok()) << server.status();
      ASSERT_TRUE((*server)->Start().ok());
      servers_.push_back(std::move(*server));
    }
    std::vector<absl::StatusOr<std::vector<Tensor>>> out(2, absl::UnknownError("did not run"));
    OnEveryWorker(2, [&](int task) {
      Scope root = Scope::NewRootScope();
      Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
      Output sum(
          ops::Raw(s, "CollectiveReduce", {ops::Const(s, Tensor::FromVector<float>({1, 2}))},
                   {{"group_size", 2}, {"group_key", 1}, {"instance_key", 1}, {"merge_op", "Add"}, {"final_op", "Id"}}),
          0, s);
      out[static_cast<size_t>(task)] = SessionOf(task)->Run({sum});
    });
    for (int task = 0; task < 2; ++task) {
      const absl::StatusOr<std::vector<Tensor>>& r = out[static_cast<size_t>(task)];
      if (same) {
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ((*r)[0].flat<float>()[1], 4.0f);
        continue;
      }
      ASSERT_FALSE(r.ok()) << "worker " << task << " reduced with a peer whose token differs";
      EXPECT_TRUE(absl::StrContains(r.status().message(),
                                    absl::StrCat("rank ", 1 - task, " (/job:worker/replica:0/task:", 1 - task, ")")))
          << r.status();
    }
  }
}

// Three replicas of a linear model train with CollectiveAllReduceOptimizer
// on different data: each starts from a different random value, the
// broadcast makes them rank 0's, and after a few steps of averaged
// gradients all three hold the same bytes.
TEST_F(CollectiveClusterTest, AllReduceOptimizerKeepsReplicasIdentical) {
  constexpr int kWorkers = 3;
  Start(kWorkers);
  std::vector<Tensor> initial(kWorkers), final_w(kWorkers), broadcast(kWorkers);
  std::vector<absl::Status> status(kWorkers);
  OnEveryWorker(kWorkers, [&](int task) {
    auto fail = [&](absl::Status s) { status[static_cast<size_t>(task)] = s; };
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
    Output w = ops::MakeVariable(s.WithOpName("w"), ops::RandomNormal(s, {4, 1}, DT_FLOAT, 10 + task));
    Tensor xs(DT_FLOAT, TensorShape({8, 4})), ys(DT_FLOAT, TensorShape({8, 1}));
    for (int i = 0; i < 32; ++i) xs.flat<float>()[static_cast<size_t>(i)] = static_cast<float>((i * 3 + task) % 7) - 3;
    for (int i = 0; i < 8; ++i) ys.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(i - task);
    Output loss =
        ops::Mean(s, ops::Square(s, ops::Sub(s, ops::MatMul(s, ops::Const(s, xs), w), ops::Const(s, ys))), {0, 1});
    CollectiveAllReduceOptions o;
    o.num_replicas = kWorkers;
    o.rank = task;
    auto opt = CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.05), o);
    if (!opt.ok()) return fail(opt.status());
    absl::StatusOr<Operation> train = (*opt)->Minimize(s, loss);
    if (!train.ok()) return fail(train.status());
    absl::StatusOr<Operation> bcast = (*opt)->BroadcastVariables(s);
    if (!bcast.ok()) return fail(bcast.status());
    Operation init = ops::GlobalVariablesInitializer(s);
    std::unique_ptr<Session> sess = SessionOf(task);
    if (auto r = sess->Run({}, {}, {init}); !r.ok()) return fail(r.status());
    auto before = sess->Run({w});
    if (!before.ok()) return fail(before.status());
    initial[static_cast<size_t>(task)] = (*before)[0];
    if (auto r = sess->Run({}, {}, {*bcast}); !r.ok()) return fail(r.status());
    auto after = sess->Run({w});
    if (!after.ok()) return fail(after.status());
    broadcast[static_cast<size_t>(task)] = (*after)[0];
    for (int step = 0; step < 5; ++step) {
      if (auto r = sess->Run({}, {}, {*train}); !r.ok()) return fail(r.status());
    }
    auto end = sess->Run({w});
    if (!end.ok()) return fail(end.status());
    final_w[static_cast<size_t>(task)] = (*end)[0];
  });
  for (int t = 0; t < kWorkers; ++t)
    ASSERT_TRUE(status[static_cast<size_t>(t)].ok()) << "worker " << t << ": " << status[static_cast<size_t>(t)];
  auto bytes = [](const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes()); };
  EXPECT_NE(bytes(initial[0]), bytes(initial[1])) << "the replicas' random initial values should differ";
  for (int t = 0; t < kWorkers; ++t) {
    EXPECT_EQ(bytes(broadcast[static_cast<size_t>(t)]), bytes(initial[0])) << "worker " << t << " after the broadcast";
    EXPECT_EQ(bytes(final_w[static_cast<size_t>(t)]), bytes(final_w[0])) << "worker " << t << " after training";
  }
  EXPECT_NE(bytes(final_w[0]), bytes(initial[0])) << "training should have moved the weights";
}

// BroadcastVariables with a root_rank (Horovod's root_rank): every worker
// ends with rank 2's random initial values; a root outside the group is
// refused naming it and the group's size.
TEST_F(CollectiveClusterTest, BroadcastVariablesFromAChosenRoot) {
  constexpr int kWorkers = 3;
  constexpr int kRoot = 2;
  Start(kWorkers);
  std::vector<Tensor> initial(kWorkers), broadcast(kWorkers);
  std::vector<absl::Status> status(kWorkers), out_of_range(kWorkers);
  OnEveryWorker(kWorkers, [&](int task) {
    auto fail = [&](absl::Status s) { status[static_cast<size_t>(task)] = s; };
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDevice(absl::StrCat("/job:worker/task:", task));
    Output w = ops::MakeVariable(s.WithOpName("w"), ops::RandomNormal(s, {3, 2}, DT_FLOAT, 20 + task));
    Output step = ops::MakeVariable(s.WithOpName("step"), ops::Const(s, int64_t{100} * task));
    CollectiveAllReduceOptions o;
    o.num_replicas = kWorkers;
    o.rank = task;
    auto opt = CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.05), o);
    if (!opt.ok()) return fail(opt.status());
    out_of_range[static_cast<size_t>(task)] = (*opt)->BroadcastVariables(s, {}, kWorkers).status();
    absl::StatusOr<Operation> bcast = (*opt)->BroadcastVariables(s, {}, kRoot);
    if (!bcast.ok()) return fail(bcast.status());
    Operation init = ops::GlobalVariablesInitializer(s);
    std::unique_ptr<Session> sess = SessionOf(task);
    if (auto r = sess->Run({}, {}, {init}); !r.ok()) return fail(r.status());
    auto before = sess->Run({w});
    if (!before.ok()) return fail(before.status());
    initial[static_cast<size_t>(task)] = (*before)[0];
    if (auto r = sess->Run({}, {}, {*bcast}); !r.ok()) return fail(r.status());
    auto after = sess->Run({w, step});
    if (!after.ok()) return fail(after.status());
    broadcast[static_cast<size_t>(task)] = (*after)[0];
    if ((*after)[1].scalar<int64_t>() != 100 * kRoot) {
      return fail(absl::InternalError(absl::StrCat("step is ", (*after)[1].scalar<int64_t>(), ", not rank 2's")));
    }
  });
  auto bytes = [](const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes()); };
  for (int t = 0; t < kWorkers; ++t) {
    ASSERT_TRUE(status[static_cast<size_t>(t)].ok()) << "worker " << t << ": " << status[static_cast<size_t>(t)];
    EXPECT_EQ(bytes(broadcast[static_cast<size_t>(t)]), bytes(initial[kRoot])) << "worker " << t;
    const absl::Status& bad = out_of_range[static_cast<size_t>(t)];
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(bad.message()).find("root_rank 3 is not a rank of the group of num_replicas=3"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(bytes(initial[0]), bytes(initial[kRoot])) << "the replicas' random initial values should differ";
}

// Tensor fusion: the same model trained with every gradient reduced on its
// own (threshold 0), with small buckets, and with the default threshold
// ends with the same bytes on every worker in all three cases, while a
// traced step runs one CollectiveReduce per bucket: 5 gradients (four
// float32, one float64) make 5, 3 and 2 collectives.
TEST_F(CollectiveClusterTest, FusedGradientsMatchUnfusedWithFewerCollectives) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 4;
  Start(kWorkers);
  struct Config {
    const char* name;
    int64_t threshold;
    int64_t want_collectives;
  };
  // Backwards from the last variable: s (float64) opens its own bucket;
  // b2, w2 and b1 (4 + 12 + 12 bytes) share one; w1 (48 bytes) is more
  // than 32 bytes, so alone; with the default threshold it joins them.
  const std::vector<Config> configs = {{"unfused", 0, 5}, {"small", 32, 3}, {"fused", int64_t{64} << 20, 2}};
  std::vector<std::vector<std::string>> values(configs.size(), std::vector<std::string>(kWorkers));
  std::vector<std::vector<int64_t>> collectives(configs.size(), std::vector<int64_t>(kWorkers, -1));
  std::vector<absl::Status> status(kWorkers);
  auto bytes = [](const Tensor& t) { return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes()); };
  OnEveryWorker(kWorkers, [&](int task) {
    auto fail = [&](absl::Status st) { status[static_cast<size_t>(task)] = st; };
    Scope root = Scope::NewRootScope();
    Scope device = root.WithDevice(absl::StrCat("/job:worker/task:", task));
    Tensor xs(DT_FLOAT, TensorShape({6, 4})), ys(DT_FLOAT, TensorShape({6, 1}));
    for (int i = 0; i < 24; ++i) xs.flat<float>()[static_cast<size_t>(i)] = static_cast<float>((i * 5 + task) % 9) - 4;
    for (int i = 0; i < 6; ++i) ys.flat<float>()[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i + task);
    std::vector<Operation> trains;
    std::vector<std::vector<Output>> vars;
    for (size_t c = 0; c < configs.size(); ++c) {
      Scope s = device.NewSubScope(configs[c].name);
      auto init = [&](std::initializer_list<float> v, const TensorShape& shape) { return ops::Const(s, v, shape); };
      Output w1 = ops::MakeVariable(
          s.WithOpName("w1"),
          init({.1f, -.2f, .3f, .4f, -.5f, .6f, .7f, .8f, -.9f, .1f, .2f, -.3f}, TensorShape({4, 3})));
      Output b1 = ops::MakeVariable(s.WithOpName("b1"), init({.01f, .02f, -.03f}, TensorShape({3})));
      Output w2 = ops::MakeVariable(s.WithOpName("w2"), init({.5f, -.25f, .125f}, TensorShape({3, 1})));
      Output b2 = ops::MakeVariable(s.WithOpName("b2"), init({.1f}, TensorShape({1})));
      Output v = ops::MakeVariable(s.WithOpName("s"), ops::Const(s, Tensor::FromVector<double>({1.5, -2.5})));
      Output y = ops::Add(s, ops::MatMul(s, ops::Add(s, ops::MatMul(s, ops::Const(s, xs), w1), b1), w2), b2);
      Output fit = ops::Mean(s, ops::Square(s, ops::Sub(s, y, ops::Const(s, ys))), {0, 1});
      Output pull = ops::Sum(s, ops::Square(s, ops::Sub(s, v, ops::Const(s, static_cast<double>(task)))), {0});
      Output loss = ops::Add(s, fit, ops::Cast(s, pull, DT_FLOAT));
      CollectiveAllReduceOptions o;
      o.num_replicas = kWorkers;
      o.rank = task;
      o.first_instance_key = 1 + 100 * static_cast<int64_t>(c);
      o.fusion_threshold_bytes = configs[c].threshold;
      auto opt = CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.05), o);
      if (!opt.ok()) return fail(opt.status());
      absl::StatusOr<Operation> train = (*opt)->Minimize(s, loss, nullptr, {w1, b1, w2, b2, v});
      if (!train.ok()) return fail(train.status());
      trains.push_back(*train);
      vars.push_back({w1, b1, w2, b2, v});
    }
    Operation init = ops::GlobalVariablesInitializer(device);
    std::unique_ptr<Session> sess = SessionOf(task);
    if (auto r = sess->Run({}, {}, {init}); !r.ok()) return fail(r.status());
    for (size_t c = 0; c < configs.size(); ++c) {
      for (int step = 0; step < kSteps; ++step) {
        StepStats trace;
        RunOptions options;
        options.trace = &trace;
        if (auto r = sess->Run({}, {}, {trains[c]}, options); !r.ok()) return fail(r.status());
        int64_t count = 0;
        for (const DeviceStepStats& d : trace.devices)
          for (const NodeExecStats& n : d.nodes) count += n.op == "CollectiveReduce";
        collectives[c][static_cast<size_t>(task)] = count;
      }
      auto end = sess->Run(vars[c]);
      if (!end.ok()) return fail(end.status());
      for (const Tensor& t : *end) values[c][static_cast<size_t>(task)] += bytes(t);
    }
  });
  for (int t = 0; t < kWorkers; ++t)
    ASSERT_TRUE(status[static_cast<size_t>(t)].ok()) << "worker " << t << ": " << status[static_cast<size_t>(t)];
  for (size_t c = 0; c < configs.size(); ++c) {
    for (int t = 0; t < kWorkers; ++t) {
      EXPECT_EQ(collectives[c][static_cast<size_t>(t)], configs[c].want_collectives)
          << configs[c].name << ", worker " << t;
      EXPECT_EQ(values[c][static_cast<size_t>(t)], values[0][0]) << configs[c].name << ", worker " << t;
    }
  }
}

}  // namespace
}  // namespace distflow
