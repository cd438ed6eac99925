// LocalWorker: the WorkerInterface of this process's own Worker. Calls go to
// the Worker in memory: a partition's feeds and fetches are the tensors
// themselves, with no message and no copy, and the call runs on the caller's
// thread until the partition waits (see Worker::RunGraphAsync). There is no
// call to cancel (CallOptions stay unused); CleanupGraph aborts a partition.
// Thread-safe; the Worker must outlive every call.
#pragma once

#include <memory>

#include "rpc/worker_interface.h"

namespace distflow {

class Worker;

class LocalWorker final : public WorkerInterface {
 public:
  explicit LocalWorker(Worker* worker) : worker_(worker) {}

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
  Worker* const worker_;
};

// A LocalWorker over `worker`, or null if `worker` is null (for
// WorkerCache::SetLocalWorker).
std::shared_ptr<WorkerInterface> NewLocalWorker(Worker* worker);

}  // namespace distflow
