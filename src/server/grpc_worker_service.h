// The WorkerService over gRPC: the handlers that put a Worker on the network,
// and the worker's side of the transport's tensor codec. Each handler checks
// the caller's cluster token (auth.h) and converts statuses (grpc_status.h).
// RunGraph decodes feeds (or reads them from the master's bulk port, on the
// worker's pool when large) and encodes fetches (offering large ones on this
// task's bulk port); RecvTensor answers from the rendezvous without a
// protobuf copy (tensor_transfer.h), as a bulk header for large tensors.
// Thread-safe; the Worker and `peers` (the worker's WorkerCache, from which
// bulk feeds are read) must outlive the service.
#pragma once

#include <memory>

namespace grpc {
class Service;
}  // namespace grpc

namespace distflow {

class Worker;
class WorkerCache;

std::unique_ptr<grpc::Service> NewGrpcWorkerService(Worker* worker, WorkerCache* peers);

}  // namespace distflow
