#include "rpc/rpc_metrics.h"

#include "absl/time/clock.h"
#include "base/env.h"
#include "base/metrics.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/interceptor.h"
#include "rpc/unix_socket.h"

namespace distflow {
namespace {

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "OTHER";
  }
}

class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit RpcMetricsInterceptor(const char* method) : method_(method ? method : "?"), start_(Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      Metrics* m = Metrics::Global();
      m->GetCounter("distflow_rpc_server_handled_total", "RPCs this task answered, by method and status code",
                    {{"method", method_}, {"code", CodeName(status.error_code())}})
          ->Increment();
      m->GetHistogram("distflow_rpc_server_handling_seconds", "Time from an RPC's arrival to its answer, by method",
                      {{"method", method_}})
          ->Observe(absl::ToDoubleSeconds(Now() - start_));
    }
    methods->Proceed();
  }

 private:
  static absl::Time Now() { return absl::FromUnixMicros(Env::Default()->NowMicros()); }

  const std::string method_;
  const absl::Time start_;
};

Counter* CallsByTransport(const char* transport) {
  return Metrics::Global()->GetCounter("distflow_rpc_server_calls_total",
                                       "RPCs this task received, by the transport they came over (unix: an abstract "
                                       "Unix-domain socket from a task on this host; tcp)",
                                       {{"transport", transport}});
}

class RpcMetricsFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    static Counter* const unix_calls = CallsByTransport("unix");
    static Counter* const tcp_calls = CallsByTransport("tcp");
    if (info->server_context() != nullptr) {
      const std::string peer = info->server_context()->peer();
      (std::string_view(TransportOfPeer(peer)) == "unix" ? unix_calls : tcp_calls)->Increment();
    }
    return new RpcMetricsInterceptor(info->method());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRpcMetricsInterceptorFactory() {
  return std::make_unique<RpcMetricsFactory>();
}

std::string TaskOfDevice(const std::string& device) {
  const size_t d = device.find("/device:");
  return d == std::string::npos ? device : device.substr(0, d);
}

void CountTensorBytesSent(const std::string& peer_task, uint64_t bytes) {
  Metrics::Global()
      ->GetCounter("distflow_tensor_bytes_sent_total", "Tensor bytes this task sent to a peer task (gRPC and bulk)",
                   {{"peer", peer_task}})
      ->Increment(static_cast<double>(bytes));
}

void CountTensorBytesReceived(const std::string& peer_task, uint64_t bytes) {
  Metrics::Global()
      ->GetCounter("distflow_tensor_bytes_received_total",
                   "Tensor bytes this task received from a peer task (gRPC and bulk)", {{"peer", peer_task}})
      ->Increment(static_cast<double>(bytes));
}

}  // namespace distflow
