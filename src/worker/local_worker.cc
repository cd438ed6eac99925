#include "worker/local_worker.h"

#include "base/logging.h"
#include "runtime/local_session.h"
#include "worker/worker.h"

namespace distflow {

void LocalWorker::GetStatusAsync(CallOptions* /*opts*/, proto::GetStatusResponse* resp, StatusCallback done) {
  worker_->GetStatus(resp);
  done(absl::OkStatus());
}

void LocalWorker::RegisterGraphAsync(CallOptions* /*opts*/, const proto::RegisterGraphRequest* req,
                                     proto::RegisterGraphResponse* resp, StatusCallback done) {
  done(worker_->RegisterGraph(*req, resp));
}

void LocalWorker::DeregisterGraphAsync(const proto::DeregisterGraphRequest* req, StatusCallback done) {
  done(worker_->DeregisterGraph(req->graph_handle()));
}

void LocalWorker::RunGraphAsync(CallOptions* /*opts*/, RunGraphCall* call, StatusCallback done) {
  worker_->RunGraphAsync(call, std::move(done));
}

void LocalWorker::CleanupGraphAsync(const proto::CleanupGraphRequest* req, StatusCallback done) {
  worker_->CleanupGraph(*req);
  done(absl::OkStatus());
}

void LocalWorker::CleanupAllAsync(CallOptions* /*opts*/, const proto::CleanupAllRequest* req, StatusCallback done) {
  ResetContainers(worker_->device(), std::vector<std::string>(req->container().begin(), req->container().end()));
  done(absl::OkStatus());
}

// As the WorkerService's Shutdown: Cancelled, not Unavailable, for a failed
// job, so that a training loop does not retry against a cluster that was
// ended on purpose.
void LocalWorker::ShutdownAsync(CallOptions* /*opts*/, const proto::ShutdownRequest* req, StatusCallback done) {
  worker_->HandleShutdown(req->failed() ? absl::CancelledError(req->reason()) : absl::OkStatus());
  if (!req->failed()) LOG(INFO) << "Shutdown requested: " << req->reason();
  done(absl::OkStatus());
}

void LocalWorker::RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                                  Rendezvous::DoneCallback done) {
  worker_->rendezvous()->RecvLocalAsync(step_id, key, cm, std::move(done));
}

std::shared_ptr<WorkerInterface> NewLocalWorker(Worker* worker) {
  return worker != nullptr ? std::make_shared<LocalWorker>(worker) : nullptr;
}

}  // namespace distflow
