// Metrics of the RPCs a server answers and of the tensors it exchanges with
// its peers, in the process-wide registry (base/metrics.h):
//   distflow_rpc_server_handled_total{method, code}  every answered RPC
//   distflow_rpc_server_handling_seconds{method}      from arrival to status
//   distflow_rpc_server_calls_total{transport}        every RPC, by transport (unix or tcp, rpc/unix_socket.h)
//   distflow_tensor_bytes_sent_total{peer}            tensors this task sent to a peer task
//   distflow_tensor_bytes_received_total{peer}        tensors received from a peer task
// Stateless helpers; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "grpcpp/support/server_interceptor.h"

namespace distflow {

// A gRPC server interceptor factory that counts and times every RPC.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewRpcMetricsInterceptorFactory();

// "/job:ps/replica:0/task:0" of a device or task name ("" stays "").
std::string TaskOfDevice(const std::string& device);

void CountTensorBytesSent(const std::string& peer_task, uint64_t bytes);
void CountTensorBytesReceived(const std::string& peer_task, uint64_t bytes);

}  // namespace distflow
