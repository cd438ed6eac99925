// Writes the seed corpora for rpc_request_fuzzer (one or more valid requests
// of every method, handles left empty so the fuzzer points them at its own
// session and graph) and bulk_wire_fuzzer (hellos, gets and puts).
// Run: build/fuzz/make_rpc_corpus fuzz/corpus/rpc_request fuzz/corpus/bulk_wire
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "rpc_methods.h"

namespace {

using namespace distflow;

int Index(const std::string& name) {
  for (size_t i = 0; i < RpcMethods().size(); ++i)
    if (name == RpcMethods()[i].name) return static_cast<int>(i);
  std::fprintf(stderr, "no method %s\n", name.c_str());
  std::exit(1);
}

void Write(const std::string& dir, const std::string& file, const std::string& bytes) {
  std::ofstream out(dir + "/" + file, std::ios::binary);
  out << bytes;
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), file.c_str());
    std::exit(1);
  }
}

void Seed(const std::string& dir, const std::string& file, const std::string& method,
          const google::protobuf::Message& request) {
  Write(dir, file, std::string(1, static_cast<char>(Index("/distflow.proto." + method))) + request.SerializeAsString());
}

void FloatTensor(proto::TensorProto* t, std::initializer_list<float> values) {
  t->set_dtype(proto::DT_FLOAT);
  t->mutable_shape()->add_dim(static_cast<int64_t>(values.size()));
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  t->set_tensor_content(bytes);
}

void RpcSeeds(const std::string& dir) {
  proto::CreateSessionRequest create;
  MakeSessionGraph(create.mutable_graph_def());
  Seed(dir, "create_session", "MasterService/CreateSession", create);

  proto::ExtendSessionRequest extend;
  (*AddNode(extend.mutable_graph_def(), "w", "Identity", "/job:ps/task:0", {"c"})->mutable_attr())["T"] =
      TypeAttr(proto::DT_FLOAT);
  Seed(dir, "extend_session", "MasterService/ExtendSession", extend);

  proto::RunStepRequest run;
  proto::NamedTensor* feed = run.add_feed();
  feed->set_name("x:0");
  FloatTensor(feed->mutable_tensor(), {3, 4});
  run.add_fetch("z:0");
  run.set_request_id(1);
  run.set_timeout_ms(1000);
  Seed(dir, "run_step", "MasterService/RunStep", run);
  run.set_trace(true);
  run.add_target("y");
  Seed(dir, "run_step_traced", "MasterService/RunStep", run);
  proto::RunStepRequest bulk_feed;
  proto::NamedTensor* big = bulk_feed.add_feed();
  big->set_name("x:0");
  big->mutable_tensor()->set_dtype(proto::DT_FLOAT);
  big->mutable_tensor()->mutable_shape()->add_dim(2);
  big->set_bulk_ticket(12345);
  big->set_bulk_port(1);
  bulk_feed.add_fetch("z:0");
  Seed(dir, "run_step_bulk_feed", "MasterService/RunStep", bulk_feed);

  // Nothing to fetch or run: such a step once stayed registered forever.
  Seed(dir, "run_step_nothing", "MasterService/RunStep", proto::RunStepRequest());
  Seed(dir, "close_session", "MasterService/CloseSession", proto::CloseSessionRequest());
  Seed(dir, "list_devices", "MasterService/ListDevices", proto::ListDevicesRequest());
  proto::ResetRequest reset;
  reset.add_container("");
  reset.add_device_filters("/job:ps");
  Seed(dir, "reset", "MasterService/Reset", reset);

  Seed(dir, "get_status", "WorkerService/GetStatus", proto::GetStatusRequest());
  proto::RegisterGraphRequest reg;
  MakePartitionGraph(reg.mutable_graph_def());
  Seed(dir, "register_graph", "WorkerService/RegisterGraph", reg);
  Seed(dir, "deregister_graph", "WorkerService/DeregisterGraph", proto::DeregisterGraphRequest());

  proto::RunGraphRequest rg;
  rg.set_step_id(7);
  rg.add_recv_key("i:0");
  rg.add_target("i");
  rg.set_timeout_ms(1000);
  rg.set_master_task("/job:worker/replica:0/task:0");
  Seed(dir, "run_graph", "WorkerService/RunGraph", rg);
  proto::NamedTensor* send = rg.add_send();
  send->set_name("c:0");
  FloatTensor(send->mutable_tensor(), {5, 6});
  rg.set_accept_bulk(true);
  Seed(dir, "run_graph_feed", "WorkerService/RunGraph", rg);

  proto::CleanupGraphRequest cleanup;
  cleanup.set_step_id(7);
  cleanup.set_abort_message("aborted by the client");
  cleanup.set_abort_code(10);
  Seed(dir, "cleanup_graph", "WorkerService/CleanupGraph", cleanup);

  proto::RecvTensorRequest recv;
  recv.set_step_id(7);
  recv.set_rendezvous_key("/job:ps/replica:0/task:0/device:CPU:0;1;/job:worker/replica:0/task:0/device:CPU:0;y:0;0:0");
  recv.set_accept_bulk(true);
  Seed(dir, "recv_tensor", "WorkerService/RecvTensor", recv);
  proto::RecvTensorRequest by_ticket;
  by_ticket.set_bulk_ticket(99);
  Seed(dir, "recv_tensor_ticket", "WorkerService/RecvTensor", by_ticket);

  proto::CleanupAllRequest cleanup_all;
  cleanup_all.add_container("");
  Seed(dir, "cleanup_all", "WorkerService/CleanupAll", cleanup_all);
  proto::ShutdownRequest shutdown;
  shutdown.set_reason("the job is done");
  Seed(dir, "shutdown", "WorkerService/Shutdown", shutdown);

  proto::HeartbeatRequest beat;
  beat.set_task("/job:worker/task:0");
  beat.set_incarnation(42);
  Seed(dir, "heartbeat", "WorkerService/Heartbeat", beat);
  beat.set_leaving(true);
  Seed(dir, "heartbeat_leaving", "WorkerService/Heartbeat", beat);

  grpc::health::v1::HealthCheckRequest health;
  health.set_service("distflow.proto.WorkerService");
  Write(dir, "health_check",
        std::string(1, static_cast<char>(Index("/grpc.health.v1.Health/Check"))) + health.SerializeAsString());
}

std::string U32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string U64(uint64_t v) { return U32(static_cast<uint32_t>(v)) + U32(static_cast<uint32_t>(v >> 32)); }

void BulkSeeds(const std::string& dir) {
  const std::string hello = "DFBH" + U32(1) + U32(0);
  const std::string hello_token = "DFBH" + U32(1) + U32(5) + "token";
  const std::string get = "DFBK" + U32(1) + "TICKET!!";  // the fuzzer puts its offer's ticket here
  const std::string put = "DFBP" + U32(1) + U64(16) + std::string(16, 'p');
  Write(dir, "hello", hello);
  Write(dir, "hello_token_get", hello_token + get);
  Write(dir, "get", hello + get);
  Write(dir, "get_unknown", hello + "DFBK" + U32(1) + U64(7));
  Write(dir, "put", hello + put);
  Write(dir, "put_get_put", hello + put + get + put);
  Write(dir, "put_truncated", hello + "DFBP" + U32(1) + U64(1 << 20) + "only a few bytes");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RPC_REQUEST_DIR BULK_WIRE_DIR\n", argv[0]);
    return 2;
  }
  RpcSeeds(argv[1]);
  BulkSeeds(argv[2]);
  return 0;
}
