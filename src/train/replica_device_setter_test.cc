#include "train/replica_device_setter.h"

#include "client/ops.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(ReplicaDeviceSetter, VariablesRoundRobinOverPsOthersOnTheWorker) {
  auto cluster = ClusterSpec::Parse("ps|h:1;h:2,worker|h:3;h:4");
  ASSERT_TRUE(cluster.ok());
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(*cluster, "/job:worker/task:1"));
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

}  // namespace
}  // namespace distflow
