// The RPCs a distflow server accepts, for rpc_request_fuzzer and its seed
// writer (an input's first byte picks one of these by index), and helpers
// that build the small graphs both use.
#pragma once

#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "proto/health.pb.h"
#include "proto/master.pb.h"
#include "proto/worker.pb.h"

namespace distflow {

// What the fuzzer renews after a call, because the call may have changed it.
enum class After { kNothing, kRenewSession, kRenewCluster };

struct RpcMethod {
  const char* name;
  const google::protobuf::Message* prototype;  // of the request
  After after;
};

inline const std::vector<RpcMethod>& RpcMethods() {
  static const auto* methods = new std::vector<RpcMethod>{
      {"/distflow.proto.MasterService/CreateSession", &proto::CreateSessionRequest::default_instance(),
       After::kNothing},
      {"/distflow.proto.MasterService/ExtendSession", &proto::ExtendSessionRequest::default_instance(),
       After::kRenewSession},
      {"/distflow.proto.MasterService/RunStep", &proto::RunStepRequest::default_instance(), After::kNothing},
      {"/distflow.proto.MasterService/CloseSession", &proto::CloseSessionRequest::default_instance(),
       After::kRenewSession},
      {"/distflow.proto.MasterService/ListDevices", &proto::ListDevicesRequest::default_instance(), After::kNothing},
      {"/distflow.proto.MasterService/Reset", &proto::ResetRequest::default_instance(), After::kRenewSession},
      {"/distflow.proto.WorkerService/GetStatus", &proto::GetStatusRequest::default_instance(), After::kNothing},
      {"/distflow.proto.WorkerService/RegisterGraph", &proto::RegisterGraphRequest::default_instance(),
       After::kNothing},
      {"/distflow.proto.WorkerService/DeregisterGraph", &proto::DeregisterGraphRequest::default_instance(),
       After::kRenewSession},
      {"/distflow.proto.WorkerService/RunGraph", &proto::RunGraphRequest::default_instance(), After::kNothing},
      {"/distflow.proto.WorkerService/CleanupGraph", &proto::CleanupGraphRequest::default_instance(), After::kNothing},
      {"/distflow.proto.WorkerService/RecvTensor", &proto::RecvTensorRequest::default_instance(), After::kNothing},
      {"/distflow.proto.WorkerService/CleanupAll", &proto::CleanupAllRequest::default_instance(), After::kRenewSession},
      {"/distflow.proto.WorkerService/Shutdown", &proto::ShutdownRequest::default_instance(), After::kRenewCluster},
      {"/distflow.proto.WorkerService/Heartbeat", &proto::HeartbeatRequest::default_instance(), After::kNothing},
      {"/grpc.health.v1.Health/Check", &grpc::health::v1::HealthCheckRequest::default_instance(), After::kNothing},
  };
  return *methods;
}

// Small graphs for the fuzzer's session and the seeds.
inline proto::AttrValue TypeAttr(proto::DataType t) {
  proto::AttrValue v;
  v.set_type(t);
  return v;
}

inline proto::NodeDef* AddNode(proto::GraphDef* g, const std::string& name, const std::string& op,
                               const std::string& device, std::vector<std::string> inputs) {
  proto::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device(device);
  for (std::string& in : inputs) n->add_input(std::move(in));
  return n;
}

// c: a float[2] constant on `device`.
inline void AddConst(proto::GraphDef* g, const std::string& device) {
  proto::NodeDef* c = AddNode(g, "c", "Const", device, {});
  (*c->mutable_attr())["dtype"] = TypeAttr(proto::DT_FLOAT);
  proto::TensorProto* value = (*c->mutable_attr())["value"].mutable_tensor();
  value->set_dtype(proto::DT_FLOAT);
  value->mutable_shape()->add_dim(2);
  const float bytes[2] = {1.0f, 2.0f};
  value->set_tensor_content(reinterpret_cast<const char*>(bytes), sizeof(bytes));
}

// The session's graph: x (a float[2] placeholder on the worker) + c (on the
// ps) -> y on the ps -> z = Identity(y) on the worker.
inline void MakeSessionGraph(proto::GraphDef* g) {
  proto::NodeDef* x = AddNode(g, "x", "Placeholder", "/job:worker/task:0", {});
  (*x->mutable_attr())["dtype"] = TypeAttr(proto::DT_FLOAT);
  (*x->mutable_attr())["shape"].mutable_shape()->add_dim(2);
  AddConst(g, "/job:ps/task:0");
  (*AddNode(g, "y", "Add", "/job:ps/task:0", {"x", "c"})->mutable_attr())["T"] = TypeAttr(proto::DT_FLOAT);
  (*AddNode(g, "z", "Identity", "/job:worker/task:0", {"y"})->mutable_attr())["T"] = TypeAttr(proto::DT_FLOAT);
}

// A partition for the ps's worker: c -> i = Identity(c).
inline void MakePartitionGraph(proto::GraphDef* g) {
  AddConst(g, "/job:ps/replica:0/task:0/device:CPU:0");
  (*AddNode(g, "i", "Identity", "/job:ps/replica:0/task:0/device:CPU:0", {"c"})->mutable_attr())["T"] =
      TypeAttr(proto::DT_FLOAT);
}

}  // namespace distflow
