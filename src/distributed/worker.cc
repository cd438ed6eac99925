#include "distributed/worker.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "distributed/tensor_transfer.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
}

}  // namespace

class Worker::Service : public proto::WorkerService::WithRawCallbackMethod_RecvTensor<proto::WorkerService::CallbackService> {
 public:
  explicit Service(Worker* w) : w_(w) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const proto::GetStatusRequest*,
                                      proto::GetStatusResponse* resp) override {
    w_->GetStatus(resp);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* RegisterGraph(grpc::CallbackServerContext* ctx, const proto::RegisterGraphRequest* req,
                                          proto::RegisterGraphResponse* resp) override {
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(w_->RegisterGraph(*req, resp)));
    return r;
  }
  grpc::ServerUnaryReactor* DeregisterGraph(grpc::CallbackServerContext* ctx, const proto::DeregisterGraphRequest* req,
                                            proto::DeregisterGraphResponse*) override {
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(w_->DeregisterGraph(req->graph_handle())));
    return r;
  }
  grpc::ServerUnaryReactor* RunGraph(grpc::CallbackServerContext* ctx, const proto::RunGraphRequest* req,
                                     proto::RunGraphResponse* resp) override {
    auto* r = ctx->DefaultReactor();
    w_->RunGraphAsync(req, resp, [r](absl::Status s) { r->Finish(ToGrpcStatus(s)); });
    return r;
  }
  grpc::ServerUnaryReactor* CleanupGraph(grpc::CallbackServerContext* ctx, const proto::CleanupGraphRequest* req,
                                         proto::CleanupGraphResponse*) override {
    w_->CleanupGraph(*req);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* RecvTensor(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override {
    auto* r = ctx->DefaultReactor();
    proto::RecvTensorRequest req;
    grpc::Status parsed = grpc::GenericDeserialize<grpc::ProtoBufferReader, proto::RecvTensorRequest>(
        const_cast<grpc::ByteBuffer*>(request), &req);
    if (!parsed.ok()) {
      r->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Malformed RecvTensor request"));
      return r;
    }
    w_->rendezvous()->RecvLocalAsync(req.step_id(), req.rendezvous_key(), nullptr,
                                     [r, response](absl::Status s, Tensor t) {
                                       if (s.ok()) *response = EncodeTensorToByteBuffer(t);
                                       r->Finish(ToGrpcStatus(s));
                                     });
    return r;
  }
  grpc::ServerUnaryReactor* CleanupAll(grpc::CallbackServerContext* ctx, const proto::CleanupAllRequest* req,
                                       proto::CleanupAllResponse*) override {
    std::vector<std::string> containers(req->container().begin(), req->container().end());
    ResetContainers(w_->device(), containers);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx, const proto::ShutdownRequest* req,
                                     proto::ShutdownResponse*) override {
    w_->HandleShutdown(req->reason());
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  Worker* w_;
};

Worker::Worker(std::string task_name, WorkerCache* peers, WorkerOptions options)
    : task_name_(std::move(task_name)),
      incarnation_(RandomIncarnation()),
      options_(options),
      compute_(std::make_unique<ThreadPool>("df_worker", 8)),
      device_(std::make_unique<Device>(task_name_ + "/device:CPU:0", "CPU", nullptr)),
      rendezvous_(task_name_,
                  [peers](const std::string& task, int64_t step, const std::string& key, CancellationManager* cm,
                          Rendezvous::DoneCallback done) { peers->RecvTensorAsync(task, step, key, cm, std::move(done)); }),
      service_(std::make_unique<Service>(this)) {}

Worker::~Worker() {
  compute_.reset();  // joins in-flight RunGraph work first
}

grpc::Service* Worker::service() { return service_.get(); }

void Worker::GetStatus(proto::GetStatusResponse* resp) const {
  resp->set_task_name(task_name_);
  proto::DeviceAttributes* d = resp->add_devices();
  d->set_name(device_->name());
  d->set_device_type(device_->device_type());
  d->set_incarnation(incarnation_);
}

absl::Status Worker::RegisterGraph(const proto::RegisterGraphRequest& req, proto::RegisterGraphResponse* resp) {
  SessionOptions so;
  so.device = device_.get();
  so.session_private_variables = false;  // every session on this task shares them, as in TensorFlow's workers
  so.default_container = "";
  so.inter_op_threads = options_.inter_op_threads;
  so.intra_op_threads = options_.intra_op_threads;
  auto session = std::make_shared<LocalSession>(so);
  absl::Status s = session->Create(req.graph_def());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("[", task_name_, "] ", s.message()));
  absl::MutexLock lock(&mu_);
  std::string handle = absl::StrCat(req.session_handle(), "/", incarnation_, "/", next_graph_++);
  graphs_[handle] = std::move(session);
  resp->set_graph_handle(handle);
  resp->set_incarnation(incarnation_);
  return absl::OkStatus();
}

absl::Status Worker::DeregisterGraph(const std::string& handle) {
  absl::MutexLock lock(&mu_);
  graphs_.erase(handle);
  return absl::OkStatus();
}

void Worker::RunGraphAsync(const proto::RunGraphRequest* req, proto::RunGraphResponse* resp,
                           std::function<void(absl::Status)> done) {
  std::shared_ptr<LocalSession> session;
  auto cm = std::make_shared<CancellationManager>();
  {
    absl::MutexLock lock(&mu_);
    auto it = graphs_.find(req->graph_handle());
    if (it != graphs_.end()) {
      session = it->second;
      steps_[req->step_id()] = cm;
    }
  }
  if (session == nullptr) {
    done(absl::AbortedError(absl::StrCat("[", task_name_, "] Graph handle '", req->graph_handle(),
                                         "' is unknown here: the task has probably restarted (its incarnation is now ",
                                         incarnation_, "). Restart the session.")));
    return;
  }
  compute_->Schedule([this, req, resp, session, cm, done = std::move(done)] {
    std::vector<std::pair<std::string, Tensor>> feeds;
    absl::Status status;
    for (const proto::NamedTensor& nt : req->send()) {
      absl::StatusOr<Tensor> t = DecodeTensor(nt.tensor());
      if (!t.ok()) {
        status = absl::InvalidArgumentError(absl::StrCat("Feed '", nt.name(), "': ", t.status().message()));
        break;
      }
      feeds.emplace_back(nt.name(), std::move(*t));
    }
    if (status.ok()) {
      RunOptions ro;
      ro.step_id = req->step_id();
      ro.rendezvous = &rendezvous_;
      ro.cancellation = cm.get();
      ro.timeout_ms = req->timeout_ms();
      std::vector<std::string> fetches(req->recv_key().begin(), req->recv_key().end());
      std::vector<std::string> targets(req->target().begin(), req->target().end());
      absl::StatusOr<std::vector<Tensor>> out = session->Run(ro, feeds, fetches, targets);
      if (out.ok()) {
        for (size_t i = 0; i < out->size(); ++i) {
          proto::NamedTensor* nt = resp->add_recv();
          nt->set_name(fetches[i]);
          EncodeTensor((*out)[i], nt->mutable_tensor());
        }
      } else {
        status = absl::Status(out.status().code(), absl::StrCat("[", task_name_, "] ", out.status().message()));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      steps_.erase(req->step_id());
    }
    done(status);
  });
}

void Worker::CleanupGraph(const proto::CleanupGraphRequest& req) {
  if (req.abort_message().empty()) return;
  absl::Status reason(static_cast<absl::StatusCode>(req.abort_code() == 0 ? 10 : req.abort_code()), req.abort_message());
  std::shared_ptr<CancellationManager> cm;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(req.step_id());
    if (it != steps_.end()) cm = it->second;
  }
  rendezvous_.AbortStep(req.step_id(), reason);
  if (cm) cm->StartCancel(reason);
}

void Worker::SetShutdownHandler(std::function<void(const std::string&)> fn) {
  absl::MutexLock lock(&mu_);
  shutdown_handler_ = std::move(fn);
}

void Worker::HandleShutdown(const std::string& reason) {
  std::function<void(const std::string&)> fn;
  {
    absl::MutexLock lock(&mu_);
    fn = shutdown_handler_;
  }
  LOG(INFO) << "Shutdown requested: " << reason;
  if (fn) fn(reason);
}

}  // namespace distflow
