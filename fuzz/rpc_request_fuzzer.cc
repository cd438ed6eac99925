// libFuzzer target for every request a server accepts: each RPC of the
// master and worker services (and gRPC's health check), sent as raw bytes
// over a real gRPC connection on loopback to a real server (the ps of a
// 1 ps + 1 worker cluster in this process), so what runs is the server's own
// parsing, validation and handlers, with every layer under them.
//
// Input: the first byte picks the method (modulo their number); the rest is
// the request's serialized bytes. A request that parses as its message and
// leaves `session_handle` or `graph_handle` empty is pointed at a live
// session (x:worker -> Add on the ps -> Identity on the worker) or a graph
// registered on the ps, so the fuzzer gets past the handle lookup into
// RunStep, ExtendSession and RunGraph. Requests that change that state
// (ExtendSession, CloseSession, Reset, DeregisterGraph, CleanupAll) are
// followed by a fresh session and graph, a Shutdown by a fresh cluster, and
// the cluster is also renewed every kRenewEvery inputs, so an input's effect
// does not depend on the ones before it more than it must.
//
// A crash, a sanitizer report, or a call that hangs past libFuzzer's
// -timeout is a bug. Answers are not checked: refusing is fine.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "distflow/logging.h"
#include "distflow/server.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/master.pb.h"
#include "proto/worker.pb.h"
#include "rpc_methods.h"

namespace distflow {
namespace {

namespace pb = google::protobuf;

class Harness {
 public:
  static Harness& Get() {
    static Harness* h = new Harness;  // lives for the whole run
    return *h;
  }

  void Run(const uint8_t* data, size_t size) {
    if (++inputs_ % kRenewEvery == 0) RenewCluster();
    if (size == 0) return;
    const RpcMethod& m = RpcMethods()[data[0] % RpcMethods().size()];
    std::string request = Retarget(m, data + 1, size - 1);
    Call(m.name, request, nullptr);
    if (m.after == After::kRenewCluster) {
      RenewCluster();
    } else if (m.after == After::kRenewSession) {
      RenewSession();
    }
  }

 private:
  static constexpr int kRenewEvery = 500;

  Harness() {
    SetMinLogSeverity(LogSeverity::kError);
    pb::SetLogHandler(nullptr);  // invalid UTF-8 in string fields is expected
    RenewCluster();
  }

  // The request's bytes, with empty handles pointed at the harness's.
  std::string Retarget(const RpcMethod& m, const uint8_t* data, size_t size) {
    std::string raw(reinterpret_cast<const char*>(data), size);
    std::unique_ptr<pb::Message> msg(m.prototype->New());
    if (!msg->ParseFromString(raw)) return raw;  // the server must refuse it
    const pb::Descriptor* d = msg->GetDescriptor();
    const pb::Reflection* r = msg->GetReflection();
    for (const auto& [field, value] :
         {std::make_pair("session_handle", &session_), std::make_pair("graph_handle", &graph_)}) {
      const pb::FieldDescriptor* f = d->FindFieldByName(field);
      if (f != nullptr && !f->is_repeated() && f->type() == pb::FieldDescriptor::TYPE_STRING &&
          r->GetString(*msg, f).empty()) {
        r->SetString(msg.get(), f, *value);
      }
    }
    return msg->SerializeAsString();
  }

  // Calls `method` with `request`; fills `response` (if not null) on success.
  bool Call(const std::string& method, const std::string& request, pb::Message* response) {
    grpc::Slice slice(request);
    grpc::ByteBuffer req(&slice, 1), resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1500));
    absl::Notification done;
    grpc::Status status;
    stub_->UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    if (!status.ok() || response == nullptr) return status.ok();
    std::vector<grpc::Slice> slices;
    if (!resp.Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return response->ParseFromString(bytes);
  }

  void RenewCluster() {
    stub_.reset();
    servers_.clear();  // stops them
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 1);
    if (!spec.ok()) Die(spec.status().ToString());
    ServerOptions options;
    options.orphan_grace_ms = -1;  // the ps stays up whatever the fuzzer says
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec, options);
    if (!servers.ok()) Die(servers.status().ToString());
    servers_ = std::move(*servers);
    std::string target;
    for (const auto& s : servers_)
      if (s->task_name() == "/job:ps/replica:0/task:0") target = s->target().substr(7);  // past "grpc://"
    stub_ = std::make_unique<grpc::GenericStub>(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    session_.clear();
    graph_.clear();
    RenewSession();
  }

  // A fresh session and registered graph (the old ones are let go).
  void RenewSession() {
    if (!session_.empty()) {
      proto::CloseSessionRequest close;
      close.set_session_handle(session_);
      Call("/distflow.proto.MasterService/CloseSession", close.SerializeAsString(), nullptr);
    }
    if (!graph_.empty()) {
      proto::DeregisterGraphRequest dereg;
      dereg.set_graph_handle(graph_);
      Call("/distflow.proto.WorkerService/DeregisterGraph", dereg.SerializeAsString(), nullptr);
    }
    proto::CreateSessionRequest create;
    MakeSessionGraph(create.mutable_graph_def());
    proto::CreateSessionResponse created;
    if (!Call("/distflow.proto.MasterService/CreateSession", create.SerializeAsString(), &created)) {
      Die("the harness's CreateSession failed");
    }
    session_ = created.session_handle();

    proto::RegisterGraphRequest reg;
    MakePartitionGraph(reg.mutable_graph_def());
    proto::RegisterGraphResponse registered;
    if (!Call("/distflow.proto.WorkerService/RegisterGraph", reg.SerializeAsString(), &registered)) {
      Die("the harness's RegisterGraph failed");
    }
    graph_ = registered.graph_handle();
  }

  [[noreturn]] static void Die(const std::string& why) {
    DF_LOG(ERROR) << "rpc_request fuzzer harness: " << why;
    std::abort();
  }

  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::string session_;
  std::string graph_;
  int64_t inputs_ = 0;
};

}  // namespace
}  // namespace distflow

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distflow::Harness::Get().Run(data, size);
  return 0;
}
