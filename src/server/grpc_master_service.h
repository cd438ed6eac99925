// The MasterService over gRPC: the handlers that put a Master on the
// network. Each checks the caller's cluster token (auth.h), runs the blocking
// calls (CreateSession waits for the cluster) on the master's pool rather
// than gRPC's threads, and converts statuses (grpc_status.h); RunStep starts
// the step on the RPC thread and answers from its completion, marking a
// failure of the step itself with kStepStatusMetadataKey. Thread-safe; the
// Master must outlive the service.
#pragma once

#include <memory>

namespace grpc {
class Service;
}  // namespace grpc

namespace distflow {

class Master;

// Trailing metadata the master's RunStep answer carries when the step itself
// failed, so that a client can tell the step's Unavailable (a task of the
// cluster is down) from not reaching the master at all.
inline constexpr char kStepStatusMetadataKey[] = "distflow-step-failed";

std::unique_ptr<grpc::Service> NewGrpcMasterService(Master* master);

}  // namespace distflow
