#include "worker/local_worker.h"

#include "worker/worker.h"

namespace distflow {

void LocalWorker::GetStatusAsync(proto::GetStatusResponse* resp, StatusCallback done) {
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

void LocalWorker::RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                                  Rendezvous::DoneCallback done) {
  worker_->rendezvous()->RecvLocalAsync(step_id, key, cm, std::move(done));
}

std::shared_ptr<WorkerInterface> NewLocalWorker(Worker* worker) {
  return worker != nullptr ? std::make_shared<LocalWorker>(worker) : nullptr;
}

}  // namespace distflow
