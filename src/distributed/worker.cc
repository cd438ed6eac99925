#include "distributed/worker.h"

#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "distributed/auth.h"
#include "distributed/grpc_status.h"
#include "distributed/rpc_metrics.h"
#include "distributed/step_stats_proto.h"
#include "distributed/tensor_transfer.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

// WorkerOptions::max_step_bytes: 0 is an eighth of the machine's memory.
int64_t StepByteLimit(int64_t configured) {
  if (configured < 0) return 0;
  if (configured > 0) return configured;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 8 : 0;
}

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
}

}  // namespace

// A RecvTensor call's reactor: the call's cancellation (deadline, cancel,
// disconnect) cancels its rendezvous wait. The CancellationManager is shared
// with the wait's callback, so it outlives every use whatever order gRPC
// runs OnCancel, the callback and OnDone in.
class RecvTensorReactor : public grpc::ServerUnaryReactor {
 public:
  struct Cancel {
    CancellationManager cm;
  };
  std::shared_ptr<Cancel> cancel = std::make_shared<Cancel>();
  void OnCancel() override { cancel->cm.StartCancel(absl::CancelledError("the caller gave up")); }
  void OnDone() override { delete this; }
};

class Worker::Service : public proto::WorkerService::WithRawCallbackMethod_RecvTensor<proto::WorkerService::CallbackService> {
 public:
  explicit Service(Worker* w) : w_(w) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const proto::GetStatusRequest*,
                                      proto::GetStatusResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    w_->GetStatus(resp);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* RegisterGraph(grpc::CallbackServerContext* ctx, const proto::RegisterGraphRequest* req,
                                          proto::RegisterGraphResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(w_->RegisterGraph(*req, resp)));
    return r;
  }
  grpc::ServerUnaryReactor* DeregisterGraph(grpc::CallbackServerContext* ctx, const proto::DeregisterGraphRequest* req,
                                            proto::DeregisterGraphResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(w_->DeregisterGraph(req->graph_handle())));
    return r;
  }
  grpc::ServerUnaryReactor* RunGraph(grpc::CallbackServerContext* ctx, const proto::RunGraphRequest* req,
                                     proto::RunGraphResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    w_->RunGraphFromRpc(req, resp, [r](absl::Status s) { r->Finish(ToGrpcStatus(s)); });
    return r;
  }
  grpc::ServerUnaryReactor* CleanupGraph(grpc::CallbackServerContext* ctx, const proto::CleanupGraphRequest* req,
                                         proto::CleanupGraphResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    w_->CleanupGraph(*req);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* RecvTensor(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override {
    if (auto* refused = Refuse(ctx)) return refused;
    proto::RecvTensorRequest req;
    grpc::Status parsed = grpc::GenericDeserialize<grpc::ProtoBufferReader, proto::RecvTensorRequest>(
        const_cast<grpc::ByteBuffer*>(request), &req);
    if (!parsed.ok()) {
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "Malformed RecvTensor request"));
      return r;
    }
    if (req.bulk_ticket() != 0) {  // an offer, over gRPC
      auto* r = ctx->DefaultReactor();
      BulkServer* bulk = w_->bulk_server();
      absl::StatusOr<Tensor> t = bulk != nullptr ? bulk->TakeOffer(req.bulk_ticket())
                                                 : absl::NotFoundError("bulk transfer is off on this task");
      if (t.ok()) *response = EncodeTensorToByteBuffer(*t);
      r->Finish(ToGrpcStatus(t.status()));
      return r;
    }
    // The wait ends when the tensor is sent, the step is aborted, or the
    // caller gives up (its deadline, cancel or disconnect): then the waiter
    // leaves the rendezvous, so calls for keys that never come cannot pile up.
    auto* r = new RecvTensorReactor();
    BulkServer* bulk = req.accept_bulk() ? w_->bulk_server() : nullptr;
    // The key ends with the receiving device: the peer this tensor goes to.
    const std::string& key = req.rendezvous_key();
    std::string peer = TaskOfDevice(key.substr(key.rfind(';') == std::string::npos ? 0 : key.rfind(';') + 1));
    w_->rendezvous()->RecvLocalAsync(req.step_id(), req.rendezvous_key(), &r->cancel->cm,
                                     [r, cancel = r->cancel, response, bulk, peer = std::move(peer)](absl::Status s,
                                                                                                     Tensor t) {
                                       if (s.ok()) {
                                         CountTensorBytesSent(peer, t.TotalBytes());
                                         // Large numeric tensors go over the bulk port; the answer names it.
                                         uint64_t ticket = bulk != nullptr && IsBulkCandidate(t) ? bulk->Offer(t) : 0;
                                         if (ticket != 0) {
                                           *response = EncodeBulkTensorHeader(t, ticket, bulk->port());
                                         } else {
                                           *response = EncodeTensorToByteBuffer(t);
                                         }
                                       }
                                       r->Finish(ToGrpcStatus(s));
                                     });
    return r;
  }
  grpc::ServerUnaryReactor* CleanupAll(grpc::CallbackServerContext* ctx, const proto::CleanupAllRequest* req,
                                       proto::CleanupAllResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    std::vector<std::string> containers(req->container().begin(), req->container().end());
    ResetContainers(w_->device(), containers);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx, const proto::ShutdownRequest* req,
                                     proto::ShutdownResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    // Cancelled, not Unavailable: a training loop must not retry against a
    // cluster that was ended on purpose.
    w_->HandleShutdown(req->failed() ? absl::CancelledError(req->reason()) : absl::OkStatus());
    if (!req->failed()) LOG(INFO) << "Shutdown requested: " << req->reason();
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const proto::HeartbeatRequest* req,
                                      proto::HeartbeatResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    if (!w_->heartbeat_handler_) {
      r->Finish(ToGrpcStatus(absl::FailedPreconditionError(
          absl::StrCat(w_->task_name_, " is not the cluster's coordinator",
                       w_->coordinator_.empty() ? std::string() : absl::StrCat(" (", w_->coordinator_, " is)"),
                       ": does the heartbeating task have the same cluster spec?"))));
      return r;
    }
    r->Finish(ToGrpcStatus(w_->heartbeat_handler_(*req, resp)));
    return r;
  }

  // Calls without the cluster's token are refused (distributed/auth.h).
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx) {
    return RefuseUnauthenticated(ctx, w_->auth_token_, w_->task_name_);
  }

 private:
  Worker* w_;
};

Worker::Worker(std::string task_name, WorkerCache* peers, WorkerOptions options)
    : task_name_(std::move(task_name)),
      incarnation_(RandomIncarnation()),
      options_(options),
      max_step_bytes_(StepByteLimit(options.max_step_bytes)),
      peers_(peers),
      compute_(std::make_unique<ThreadPool>("df_worker", 8)),
      device_(std::make_unique<Device>(task_name_ + "/device:CPU:0", "CPU", nullptr)),
      rendezvous_(task_name_,
                  [peers](const std::string& task, int64_t step, const std::string& key, CancellationManager* cm,
                          Rendezvous::DoneCallback done) { peers->RecvTensorAsync(task, step, key, cm, std::move(done)); }),
      service_(std::make_unique<Service>(this)) {}

Worker::~Worker() {
  compute_.reset();  // joins feed decoding still queued
  // Cancel the partitions still running and wait for them: their completions
  // use this Worker.
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    steps = steps_;
  }
  absl::Status reason = absl::CancelledError(absl::StrCat("Task ", task_name_, " is shutting down"));
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    run.cm->StartCancel(reason);
  }
  absl::MutexLock lock(&inflight_->mu);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return inflight_->count == 0; };
  if (!inflight_->mu.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30))) {
    LOG(ERROR) << task_name_ << ": " << inflight_->count << " partition run(s) did not end within 30 s of shutdown";
  }
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
  so.session_private_variables = false;  // every session on this task shares them, as in TensorFlow's workers
  so.default_container = "";
  so.inter_op_threads = options_.inter_op_threads;
  so.intra_op_threads = options_.intra_op_threads;
  so.max_step_bytes = max_step_bytes_;
  auto session = std::make_shared<LocalSession>(so, /*timer=*/nullptr, device_.get());
  absl::Status s = session->Create(req.graph_def());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("[", task_name_, "] ", s.message()));
  absl::MutexLock lock(&mu_);
  std::string handle = absl::StrCat(req.session_handle(), "/", incarnation_, "/", next_graph_++);
  graphs_[handle] = std::move(session);
  resp->set_graph_handle(handle);
  resp->set_incarnation(incarnation_);
  resp->set_accepts_bulk(peers_->bulk_enabled());
  return absl::OkStatus();
}

absl::Status Worker::DeregisterGraph(const std::string& handle) {
  absl::MutexLock lock(&mu_);
  graphs_.erase(handle);
  return absl::OkStatus();
}

void Worker::RunGraphFromRpc(const proto::RunGraphRequest* req, proto::RunGraphResponse* resp,
                             std::function<void(absl::Status)> done) {
  auto call = std::make_shared<RunGraphCall>();
  call->graph_handle = req->graph_handle();
  call->step_id = req->step_id();
  call->timeout_ms = req->timeout_ms();
  call->master_task = req->master_task();
  call->recv_keys.assign(req->recv_key().begin(), req->recv_key().end());
  call->targets.assign(req->target().begin(), req->target().end());
  call->trace = req->trace();
  BulkServer* bulk = req->accept_bulk() ? bulk_ : nullptr;
  auto start = [this, req, resp, call, bulk, done = std::move(done)]() mutable {
    for (const proto::NamedTensor& nt : req->send()) {
      absl::StatusOr<Tensor> t = ReceiveFeed(nt, req->master_task());
      if (!t.ok()) {
        done(absl::Status(t.status().code(),
                          absl::StrCat("[", task_name_, "] Feed '", nt.name(), "': ", t.status().message())));
        return;
      }
      call->send.emplace_back(nt.name(), std::move(*t));
    }
    RunGraphAsync(call.get(), [call, resp, bulk, done = std::move(done)](absl::Status s) {
      if (call->trace) AppendStepStatsProto(call->stats, resp->mutable_step_stats());
      if (s.ok()) {
        for (size_t i = 0; i < call->recv.size(); ++i) {
          proto::NamedTensor* nt = resp->add_recv();
          const Tensor& t = call->recv[i];
          // Large fetches wait on the bulk port for the master to read them.
          uint64_t ticket = bulk != nullptr && IsBulkCandidate(t) ? bulk->Offer(t) : 0;
          if (ticket != 0) {
            SetBulkNamedTensor(call->recv_keys[i], t, ticket, bulk->port(), nt);
          } else {
            nt->set_name(call->recv_keys[i]);
            EncodeTensor(t, nt->mutable_tensor());
          }
        }
      }
      done(s);
    });
  };
  // Copying large feeds out of the message, or reading them from the
  // master's bulk port, is left to the worker's pool.
  size_t feed_bytes = 0;
  bool bulk_feeds = false;
  for (const proto::NamedTensor& nt : req->send()) {
    feed_bytes += nt.tensor().ByteSizeLong();
    bulk_feeds |= nt.bulk_ticket() != 0;
  }
  if (bulk_feeds || feed_bytes > kInlineFeedBytes) {
    compute_->Schedule(std::move(start));
  } else {
    start();
  }
}

absl::StatusOr<Tensor> Worker::ReceiveFeed(const proto::NamedTensor& nt, const std::string& master_task) {
  if (nt.bulk_ticket() == 0) return DecodeTensor(nt.tensor());
  absl::StatusOr<std::pair<DataType, TensorShape>> spec = BulkTensorSpec(nt);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<Tensor> t = Tensor::Allocate(spec->first, spec->second);
  if (!t.ok()) return t.status();
  absl::Status got = peers_->FetchBulkInto(master_task, nt.bulk_ticket(), nt.bulk_port(), &*t, nullptr);
  if (!got.ok()) return got;
  return t;
}

void Worker::RunGraphAsync(RunGraphCall* call, std::function<void(absl::Status)> done) {
  std::shared_ptr<LocalSession> session;
  auto cm = std::make_shared<CancellationManager>();
  {
    absl::MutexLock lock(&mu_);
    auto it = graphs_.find(call->graph_handle);
    if (it != graphs_.end()) {
      session = it->second;
      steps_[call->step_id] = RunningStep{cm, call->master_task, absl::Now(), absl::Now()};
    }
  }
  if (session == nullptr) {
    done(absl::AbortedError(absl::StrCat("[", task_name_, "] Graph handle '", call->graph_handle,
                                         "' is unknown here: the task has probably restarted (its incarnation is now ",
                                         incarnation_, "). Restart the session.")));
    return;
  }
  bool over = false;
  {
    absl::MutexLock lock(&inflight_->mu);
    over = options_.max_concurrent_steps > 0 && inflight_->count >= options_.max_concurrent_steps;
    if (!over) ++inflight_->count;
  }
  if (over) {
    {
      absl::MutexLock lock(&mu_);
      auto it = steps_.find(call->step_id);
      if (it != steps_.end() && it->second.cm == cm) steps_.erase(it);
    }
    done(absl::ResourceExhaustedError(absl::StrCat(
        "[", task_name_, "] ", options_.max_concurrent_steps,
        " partitions are running here already, the most this task runs at once: raise --max_concurrent_steps "
        "(WorkerOptions::max_concurrent_steps) or run fewer steps at a time")));
    return;
  }
  RunOptions ro;
  ro.timeout_ms = call->timeout_ms;
  PartitionStep partition;
  partition.step_id = call->step_id;
  partition.rendezvous = &rendezvous_;
  partition.cancellation = cm.get();
  if (call->trace) ro.trace = &call->stats;
  session->RunAsync(ro, call->send, call->recv_keys, call->targets,
                    [this, call, session, cm, inflight = inflight_,
                     done = std::move(done)](absl::StatusOr<std::vector<Tensor>> out) {
                      {
                        absl::MutexLock lock(&mu_);
                        auto it = steps_.find(call->step_id);
                        if (it != steps_.end() && it->second.cm == cm) steps_.erase(it);
                      }
                      if (!out.ok()) {
                        done(absl::Status(out.status().code(),
                                          absl::StrCat("[", task_name_, "] ", out.status().message())));
                      } else {
                        call->recv = std::move(*out);
                        done(absl::OkStatus());
                      }
                      // The last touch: the shared count, not the Worker.
                      absl::MutexLock lock(&inflight->mu);
                      --inflight->count;
                    },
                    partition);
}

void Worker::CleanupGraph(const proto::CleanupGraphRequest& req) {
  if (req.abort_message().empty()) return;
  absl::Status reason(static_cast<absl::StatusCode>(req.abort_code() == 0 ? 10 : req.abort_code()), req.abort_message());
  std::shared_ptr<CancellationManager> cm;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(req.step_id());
    if (it != steps_.end()) cm = it->second.cm;
  }
  rendezvous_.AbortStep(req.step_id(), reason);
  if (cm) cm->StartCancel(reason);
}

void Worker::AbortAll(const absl::Status& reason) {
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    steps = steps_;
  }
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    run.cm->StartCancel(reason);
  }
  rendezvous_.AbortAll(reason);
}

void Worker::AbortStepsOfMaster(const std::string& task, const absl::Status& reason) {
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [step, run] : steps_)
      if (run.master_task == task) steps.emplace(step, run);
  }
  if (!steps.empty()) {
    LOG(WARNING) << "Aborting " << steps.size() << " step(s) run for " << task << ": " << reason.message();
  }
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    run.cm->StartCancel(reason);
  }
}

void Worker::LogStalledSteps(absl::Duration every) {
  const absl::Time now = absl::Now();
  std::vector<std::pair<int64_t, RunningStep>> stalled;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [step, run] : steps_) {
      if (now - run.started < every || now - run.logged < every) continue;
      run.logged = now;
      stalled.emplace_back(step, run);
    }
  }
  for (const auto& [step, run] : stalled) {
    std::vector<std::string> waiting = rendezvous_.Waiting(step);
    constexpr size_t kShown = 5;
    std::string shown;
    for (size_t i = 0; i < waiting.size() && i < kShown; ++i) absl::StrAppend(&shown, i ? "; " : "", waiting[i]);
    if (waiting.size() > kShown) absl::StrAppend(&shown, "; and ", waiting.size() - kShown, " more");
    LOG(WARNING) << "Step " << step << " (run for " << (run.master_task.empty() ? task_name_ : run.master_task)
                 << ") has been running here for " << absl::FormatDuration(absl::Trunc(now - run.started, absl::Milliseconds(100)))
                 << (waiting.empty() ? std::string("; no receive is waiting (a kernel is running or waiting)")
                                     : absl::StrCat("; waiting for ", shown));
  }
}

int Worker::running_partitions() const {
  absl::MutexLock lock(&inflight_->mu);
  return inflight_->count;
}

size_t Worker::registered_graphs() const {
  absl::MutexLock lock(&mu_);
  return graphs_.size();
}

void Worker::SetShutdownHandler(std::function<void(const absl::Status&)> fn) {
  absl::MutexLock lock(&mu_);
  shutdown_handler_ = std::move(fn);
}

void Worker::HandleShutdown(const absl::Status& why) {
  std::function<void(const absl::Status&)> fn;
  {
    absl::MutexLock lock(&mu_);
    fn = shutdown_handler_;
  }
  if (!why.ok()) LOG(ERROR) << "The cluster was ended: " << why.message();
  if (fn) fn(why);
}

}  // namespace distflow
