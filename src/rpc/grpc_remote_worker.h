// GrpcRemoteWorker: the WorkerInterface of a task in another process, over
// its WorkerService. It owns what a call over the network needs and nothing
// above it sees: the stub, a ClientContext per call with its deadline, the
// conversion of gRPC statuses, cancellation by TryCancel (through
// CallOptions), and the tensor codec of RunGraph: a feed of 1 MiB or more is
// offered on this task's bulk port when the worker can read it from there,
// and a fetch the worker left on its bulk port is read back (on the cache's
// bulk pool, since the read blocks) before the call completes. Smaller
// tensors travel inside the messages.
//
// Made and kept by WorkerCache (one per task and channel); shared with the
// calls in flight, so a call outlives the cache's entry. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "rpc/worker_interface.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace distflow {

class WorkerCache;

class GrpcRemoteWorker final : public WorkerInterface {
 public:
  // `cache` (which must outlive this) supplies the bulk port and reader.
  GrpcRemoteWorker(std::string task, std::shared_ptr<grpc::Channel> channel, WorkerCache* cache);
  ~GrpcRemoteWorker() override;

  void GetStatusAsync(CallOptions* opts, proto::GetStatusResponse* resp, StatusCallback done) override;
  void RegisterGraphAsync(CallOptions* opts, const proto::RegisterGraphRequest* req, proto::RegisterGraphResponse* resp,
                          StatusCallback done) override;
  void DeregisterGraphAsync(const proto::DeregisterGraphRequest* req, StatusCallback done) override;
  void RunGraphAsync(CallOptions* opts, RunGraphCall* call, StatusCallback done) override;
  void CleanupGraphAsync(const proto::CleanupGraphRequest* req, StatusCallback done) override;
  void CleanupAllAsync(CallOptions* opts, const proto::CleanupAllRequest* req, StatusCallback done) override;
  void ShutdownAsync(CallOptions* opts, const proto::ShutdownRequest* req, StatusCallback done) override;
  void RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                       Rendezvous::DoneCallback done) override;

 private:
  struct Rpc;
  const std::string task_;
  WorkerCache* const cache_;
  std::unique_ptr<Rpc> rpc_;  // the stub (gRPC types stay in the .cc)
  // The worker said at RegisterGraph that it reads feeds from our bulk port.
  std::atomic<bool> accepts_bulk_{false};
};

}  // namespace distflow
