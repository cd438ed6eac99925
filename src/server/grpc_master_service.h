// The MasterService over gRPC: the handlers that put a Master on the
// network. Each checks the caller's cluster token (auth.h), runs the blocking
// calls (CreateSession waits for the cluster) on the master's pool rather
// than gRPC's threads, and converts statuses (grpc_status.h); RunStep starts
// the step on the RPC thread and answers from its completion, marking a
// failure of the step itself with kStepStatusMetadataKey (rpc/grpc_status.h). Thread-safe; the
// Master must outlive the service.
#pragma once

#include <memory>

namespace grpc {
class Service;
}  // namespace grpc

namespace distflow {

class Master;

std::unique_ptr<grpc::Service> NewGrpcMasterService(Master* master);

}  // namespace distflow
