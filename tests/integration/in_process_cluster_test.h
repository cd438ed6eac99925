// The fixture of in_process_cluster_test's files (in_process_cluster_*.cc):
// a cluster of real gRPC servers inside the test process (2 ps + 2
// workers), driven through grpc:// sessions exactly as a user would. Its
// cases (TEST_P) run twice, instantiated once in in_process_cluster_test.cc:
// with the client calling its in-process master directly, and through gRPC
// as a client in another process would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "distflow/distflow.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/master.grpc.pb.h"
#include "server/grpc_server.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace cluster_test {

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

}  // namespace cluster_test
}  // namespace distflow
