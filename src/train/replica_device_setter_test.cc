#include "distflow/train/replica_device_setter.h"

#include "client/graph_state.h"
#include "distflow/ops.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

ClusterSpec TwoPs() {
  auto cluster = ClusterSpec::Parse("ps|h:1;h:2,worker|h:3;h:4");
  EXPECT_TRUE(cluster.ok());
  return *cluster;
}

TEST(ReplicaDeviceSetter, VariablesRoundRobinOverPsOthersOnTheWorker) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(TwoPs(), "/job:worker/task:1"));
  auto a = ops::Variable(s, {2}, DT_FLOAT);
  auto b = ops::Variable(s, {2}, DT_FLOAT);
  auto c = ops::Variable(s, {2}, DT_FLOAT);
  auto x = ops::Const(s, 1.f);
  EXPECT_EQ(a.node()->def().device(), "/job:ps/task:0");
  EXPECT_EQ(b.node()->def().device(), "/job:ps/task:1");
  EXPECT_EQ(c.node()->def().device(), "/job:ps/task:0");
  EXPECT_EQ(x.node()->def().device(), "/job:worker/task:1");
}

TEST(ReplicaDeviceSetter, NoPsJobKeepsEverythingOnTheWorker) {
  auto cluster = ClusterSpec::Parse("worker|h:3");
  ASSERT_TRUE(cluster.ok());
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(*cluster, "/job:worker/task:0"));
  EXPECT_EQ(ops::Variable(s, {2}, DT_FLOAT).node()->def().device(), "/job:worker/task:0");
}

// Each row: device scopes outside the setter, inside it, the op, and where
// the op lands (the setter is fresh per row, so a chosen ps task is 0).
struct MergeCase {
  const char* outer;
  const char* inner;
  bool variable;
  const char* expected;
};

TEST(ReplicaDeviceSetter, MergesWithDeviceScopesAsTensorFlowDoes) {
  const MergeCase cases[] = {
      {"", "", true, "/job:ps/task:0"},
      {"", "", false, "/job:worker/task:1"},
      // Inside the setter, an explicit device wins for the fields it sets.
      {"", "/job:worker/task:0", true, "/job:worker/task:0"},
      {"", "/device:CPU:0", true, "/job:ps/task:0/device:CPU:0"},
      {"", "/task:1", true, "/job:ps/task:1"},
      {"", "/job:ps/task:1", false, "/job:ps/task:1"},
      {"", "/device:CPU:0", false, "/job:worker/task:1/device:CPU:0"},
      // Outside it: a ps job or no job still gets a ps task; its own fields win.
      {"/job:ps", "", true, "/job:ps/task:0"},
      {"/job:ps/task:1", "", true, "/job:ps/task:1"},
      {"/device:CPU:0", "", true, "/job:ps/task:0/device:CPU:0"},
      // Another job: no ps task is assigned, the variable stays in that job.
      {"/job:worker", "", true, "/job:worker"},
      {"/job:worker/task:0", "", true, "/job:worker/task:0"},
      {"/job:worker/task:0", "", false, "/job:worker/task:0"},
  };
  for (const MergeCase& c : cases) {
    Scope root = Scope::NewRootScope();
    Scope outer = std::string(c.outer).empty() ? root : root.WithDevice(c.outer);
    Scope s = outer.WithDeviceFunction(ReplicaDeviceSetter(TwoPs(), "/job:worker/task:1"));
    if (!std::string(c.inner).empty()) s = s.WithDevice(c.inner);
    Output o = c.variable ? ops::Variable(s, {2}, DT_FLOAT) : ops::Const(s, 1.f);
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o.node()->def().device(), c.expected)
        << "outer '" << c.outer << "', inner '" << c.inner << "', " << (c.variable ? "variable" : "const");
  }
}

TEST(ReplicaDeviceSetter, AnInnerDeviceStillTakesARoundRobinTurnAsInTensorFlow) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(TwoPs(), "/job:worker/task:1"));
  auto a = ops::Variable(s, {2}, DT_FLOAT);
  auto pinned = ops::Variable(s.WithDevice("/job:ps/task:0"), {2}, DT_FLOAT);
  auto b = ops::Variable(s, {2}, DT_FLOAT);
  EXPECT_EQ(a.node()->def().device(), "/job:ps/task:0");
  EXPECT_EQ(pinned.node()->def().device(), "/job:ps/task:0");
  // The inner device is merged after the setter ran: TensorFlow's order.
  EXPECT_EQ(b.node()->def().device(), "/job:ps/task:0");
}

TEST(ReplicaDeviceSetter, GreedyBalancesPsTasksByBytes) {
  // A big layer, then smaller ones: round robin would put 4000 + 40 + 2400
  // bytes on task 0 and 40 + 2000 on task 1.
  const std::vector<int64_t> floats = {1000, 10, 10, 500, 600};
  ReplicaDeviceSetterOptions o;
  o.worker_device = "/job:worker/task:0";
  o.strategy = PsStrategy::kGreedyBytes;
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(TwoPs(), o));
  std::vector<std::string> devices;
  int64_t load[2] = {0, 0};
  for (int64_t n : floats) {
    Output v = ops::Variable(s, {n}, DT_FLOAT);
    devices.push_back(v.node()->def().device());
    load[devices.back() == "/job:ps/task:1"] += 4 * n;
  }
  EXPECT_EQ(devices, (std::vector<std::string>{"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:1", "/job:ps/task:1",
                                               "/job:ps/task:1"}));
  EXPECT_EQ(load[0], 4000);
  EXPECT_EQ(load[1], 4480);
  // Doubles count twice as much as floats.
  NodeInfo doubles;
  doubles.op = "VariableV2";
  doubles.dtype = DT_DOUBLE;
  doubles.shape = PartialShape({3, 5});
  EXPECT_EQ(VariableBytes(doubles), 120);
}

TEST(ReplicaDeviceSetter, GreedyIsTheSameOnEveryWorker) {
  auto build = [](const std::string& worker) {
    ReplicaDeviceSetterOptions o;
    o.worker_device = worker;
    o.strategy = PsStrategy::kGreedyBytes;
    Scope root = Scope::NewRootScope();
    Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(TwoPs(), o));
    std::vector<std::string> out;
    for (int64_t n : {7, 300, 2, 2, 90, 45}) out.push_back(ops::Variable(s, {n, 3}, DT_FLOAT).node()->def().device());
    return out;
  };
  EXPECT_EQ(build("/job:worker/task:0"), build("/job:worker/task:1"));
}

}  // namespace
}  // namespace distflow
