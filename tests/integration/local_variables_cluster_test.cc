// MonitoredSession's default Scaffold on a real in-process cluster (1 ps + 2
// workers, gRPC on loopback), each worker building its own graph and running
// its own session, as separate worker processes would: a local variable (a
// count of the task's own steps, on the task's own device) is initialised by
// the default local_init_op on every task, the non-chief included, which
// never runs init_op. Before that default a non-chief's first step failed on
// the uninitialised counter.
#include <string>
#include <thread>

#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/supervisor.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

constexpr int kLocalSteps = 4;

struct WorkerResult {
  absl::Status status;
  float seen = -1;  // the task's local step count after its steps
  float w = 0;
};

WorkerResult RunWorker(const ClusterSpec& spec, const std::string& target, int task) {
  WorkerResult res;
  const std::string worker = "/job:worker/task:" + std::to_string(task);
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(spec, worker));
  Output x = ops::Placeholder(s.WithOpName("x"), DT_FLOAT, PartialShape({}));
  Output w = ops::MakeVariable(s.WithOpName("w"), ops::Const(s, 0.0f));
  Output step = CreateGlobalStep(s);
  Output diff = ops::Sub(s, w, x);
  Output loss = ops::Mul(s, diff, diff);
  // The task's own counter: a local variable on the task's own device (the
  // inner device string wins over the setter's choice of a ps).
  ops::VariableOptions local;
  local.local = true;
  Output seen = ops::MakeVariable(s.WithDevice(worker).WithOpName("seen"), ops::Const(s, 0.0f), local);
  GradientDescentOptimizer sgd(0.1);
  absl::StatusOr<Operation> train = sgd.Minimize(s, loss, &step);
  if (!train.ok()) {
    res.status = train.status();
    return res;
  }
  Operation count = ops::AssignAdd(s.WithDevice(worker), seen, ops::Const(s, 1.0f)).op();
  SupervisorOptions o;  // no init_op, no local_init_op: the defaults
  o.is_chief = task == 0;
  o.global_step = step;
  o.ready_timeout = absl::Seconds(60);
  o.session_options.wait_for_cluster_ms = 20000;
  auto session = MonitoredSession::Create(root, target, o);
  if (!session.ok()) {
    res.status = session.status();
    return res;
  }
  for (int i = 0; i < kLocalSteps && res.status.ok(); ++i) {
    res.status = (*session)->Run({{x, Tensor::Scalar<float>(2.0f)}}, {}, {*train, count}).status();
  }
  if (res.status.ok()) {
    auto v = (*session)->Run({}, {seen, w});
    res.status = v.status();
    if (v.ok()) {
      res.seen = (*v)[0].scalar<float>();
      res.w = (*v)[1].scalar<float>();
    }
  }
  absl::Status closed = (*session)->Close();
  if (res.status.ok()) res.status = closed;
  return res;
}

TEST(DefaultScaffold, EveryTaskInitialisesItsLocalVariables) {
  auto spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string targets[2];
  for (auto& server : *servers) {
    for (int t = 0; t < 2; ++t) {
      if (server->task_name() == "/job:worker/replica:0/task:" + std::to_string(t)) targets[t] = server->target();
    }
  }
  ASSERT_FALSE(targets[0].empty());
  ASSERT_FALSE(targets[1].empty());
  WorkerResult results[2];
  std::thread non_chief([&] { results[1] = RunWorker(*spec, targets[1], 1); });
  results[0] = RunWorker(*spec, targets[0], 0);
  non_chief.join();
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE("worker " + std::to_string(t));
    ASSERT_TRUE(results[t].status.ok()) << results[t].status;
    // Each task counted its own steps only: the counters are not shared.
    EXPECT_EQ(results[t].seen, static_cast<float>(kLocalSteps));
    EXPECT_GT(results[t].w, 0.0f);  // the shared w on the ps was trained towards 2
  }
  // Both tasks' steps went to the one global step on the ps.
  Scope root = Scope::NewRootScope();
  Output step = CreateGlobalStep(root.WithDevice("/job:ps/task:0"));
  Session check(targets[0]);
  auto v = check.Run({step});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->at(0).scalar<int64_t>(), 2 * kLocalSteps);
}

}  // namespace
}  // namespace distflow
