// Helpers for tests of servers and grpc:// sessions (server_test.cc,
// grpc_session_test.cc): lean servers, bounded session options, one-node
// graphs and a step that holds until it is cancelled. Test-only.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distflow/server.h"
#include "distflow/tensor.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/grpc_session.h"

namespace distflow {
namespace test {

// A step's hold (AddHold) outlasts every bound a test waits for.
inline constexpr int64_t kHoldMs = 300000;

// Servers that use two cores at most and ignore any token in the environment.
inline ServerOptions LeanOptions() {
  ServerOptions o;
  o.auth_token = "";
  o.worker.inter_op_threads = 2;
  o.worker.intra_op_threads = 1;
  return o;
}

// The one task of "`job`|127.0.0.1:0", started; null (with a failure) if it could not be.
inline std::unique_ptr<Server> StartOneTask(const ServerOptions& options, const std::string& job = "worker") {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(job + "|127.0.0.1:0");
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(*spec, job, 0, options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  absl::Status started = (*server)->Start();
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return nullptr;
  return std::move(*server);
}

// Session options whose every wait is bounded.
inline SessionOptions BoundedOptions(bool in_process_master) {
  SessionOptions o;
  o.in_process_master = in_process_master;
  o.wait_for_cluster_ms = 20000;
  o.operation_timeout_ms = 60000;
  return o;
}

inline std::unique_ptr<GrpcSession> NewSession(const std::string& target, const SessionOptions& options) {
  absl::StatusOr<std::unique_ptr<GrpcSession>> session = GrpcSession::Create(target, options);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? std::move(*session) : nullptr;
}

inline proto::GraphDef OneConst(const std::string& name, float value, const std::string& device = "") {
  proto::GraphDef g;
  AddConst(&g, name, Tensor::Scalar<float>(value))->set_device(device);
  return g;
}

// `name` (SyncBarrierWait) holds its step until the step is cancelled: the
// barrier is never released.
inline void AddHold(proto::GraphDef* g, const std::string& name) {
  AddConst(g, name + "_step", Tensor::Scalar<int64_t>(0));
  proto::NodeDef* wait = AddNode(g, name, "SyncBarrierWait", {name + "_step"});
  SetAttrString(wait, "shared_name", name);
  SetAttrInt(wait, "replica_id", 0);
  SetAttrInt(wait, "replicas_to_aggregate", 1);
  SetAttrInt(wait, "total_num_replicas", 1);
  SetAttrInt(wait, "timeout_ms", kHoldMs);
}

}  // namespace test
}  // namespace distflow
