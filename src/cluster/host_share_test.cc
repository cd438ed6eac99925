#include "cluster/host_share.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

ClusterSpec Spec(const std::string& text) {
  absl::StatusOr<ClusterSpec> s = ClusterSpec::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : ClusterSpec();
}

TEST(TasksOnHost, CountsEveryLoopbackTaskOfTheReadmeCluster) {
  ClusterSpec c = Spec("ps|127.0.0.1:2222,worker|127.0.0.1:2223;localhost:2224;127.0.0.1:2225");
  EXPECT_EQ(TasksOnHost(c, "127.0.0.1"), 4);
  EXPECT_EQ(TasksOnHost(c, "localhost"), 4);
}

TEST(TasksOnHost, CountsOnlyTasksOfTheSameRemoteHost) {
  ClusterSpec c = Spec("ps|10.1.0.1:2222,worker|10.1.0.2:2223;10.1.0.2:2224;10.1.0.3:2225");
  EXPECT_EQ(TasksOnHost(c, "10.1.0.2"), 2);
  EXPECT_EQ(TasksOnHost(c, "10.1.0.3"), 1);
  EXPECT_EQ(TasksOnHost(c, "127.0.0.1"), 1);  // none here: still the asking task
}

}  // namespace
}  // namespace distflow
