#include "server/grpc_worker_service.h"

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "bulk/bulk_transfer.h"
#include "cluster/device_name.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_status.h"
#include "rpc/rpc_metrics.h"
#include "rpc/step_stats_proto.h"
#include "rpc/tensor_transfer.h"
#include "rpc/unix_socket.h"
#include "rpc/worker_cache.h"
#include "tensor/tensor_codec.h"
#include "worker/worker.h"

namespace distflow {
namespace {

// Feeds larger than this are decoded on the worker's pool, not the RPC thread.
constexpr size_t kInlineFeedBytes = 1 << 20;

// A feed from a RunGraph request: decoded, or read from the master's bulk port.
absl::StatusOr<Tensor> ReceiveFeed(WorkerCache* peers, const proto::NamedTensor& nt, const std::string& master_task) {
  if (nt.bulk_ticket() == 0) return DecodeTensor(nt.tensor());
  ASSIGN_OR_RETURN(auto spec, BulkTensorSpec(nt));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(spec.first, spec.second));
  RETURN_IF_ERROR(peers->FetchBulkInto(master_task, nt.bulk_ticket(), nt.bulk_port(), &t, nullptr));
  return t;
}

// A RunGraph request into a RunGraphCall: feeds decoded or read from the
// master's bulk port, fetches encoded or offered on ours.
// Captures only `w` and `peers` (which outlive the service and its pool), not the service.
void RunGraphFromRpc(Worker* w, WorkerCache* peers, const proto::RunGraphRequest* req, proto::RunGraphResponse* resp,
                     std::function<void(absl::Status)> done) {
  auto call = std::make_shared<RunGraphCall>();
  call->graph_handle = req->graph_handle();
  call->step_id = req->step_id();
  call->timeout_ms = req->timeout_ms();
  call->master_task = req->master_task();
  call->recv_keys.assign(req->recv_key().begin(), req->recv_key().end());
  call->targets.assign(req->target().begin(), req->target().end());
  call->trace = req->trace();
  BulkServer* bulk = req->accept_bulk() ? w->bulk_server() : nullptr;
  auto start = [w, peers, req, resp, call, bulk, done = std::move(done)]() mutable {
    for (const proto::NamedTensor& nt : req->send()) {
      absl::StatusOr<Tensor> t = ReceiveFeed(peers, nt, req->master_task());
      if (!t.ok()) {
        done(absl::Status(t.status().code(),
                          absl::StrCat("[", w->task_name(), "] Feed '", nt.name(), "': ", t.status().message())));
        return;
      }
      call->send.emplace_back(nt.name(), std::move(*t));
    }
    w->RunGraphAsync(call.get(), [call, resp, bulk, done = std::move(done)](absl::Status s) {
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
    w->compute_pool()->Schedule(std::move(start));
  } else {
    start();
  }
}

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

class GrpcWorkerService final
    : public proto::WorkerService::WithRawCallbackMethod_RecvTensor<proto::WorkerService::CallbackService> {
 public:
  GrpcWorkerService(Worker* w, WorkerCache* peers) : w_(w), peers_(peers) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const proto::GetStatusRequest*,
                                      proto::GetStatusResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    // Where a task on this host can reach this one (rpc/unix_socket.h).
    if (const std::string& where = peers_->unix_socket_announcement(); !where.empty()) {
      ctx->AddInitialMetadata(kUnixSocketMetadataKey, where);
    }
    w_->GetStatus(resp);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* RegisterGraph(grpc::CallbackServerContext* ctx, const proto::RegisterGraphRequest* req,
                                          proto::RegisterGraphResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    absl::Status s = w_->RegisterGraph(*req, resp);
    // Large feeds may come over the master's bulk port if we can read them.
    if (s.ok()) resp->set_accepts_bulk(peers_->bulk_enabled());
    r->Finish(ToGrpcStatus(s));
    return r;
  }
  grpc::ServerUnaryReactor* DeregisterGraph(grpc::CallbackServerContext* ctx, const proto::DeregisterGraphRequest* req,
                                            proto::DeregisterGraphResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    // Deregistering waits for the session's deferred updates in flight:
    // not on gRPC's thread.
    w_->compute_pool()->Schedule(
        [w = w_, r, handle = req->graph_handle()] { r->Finish(ToGrpcStatus(w->DeregisterGraph(handle))); });
    return r;
  }
  grpc::ServerUnaryReactor* RunGraph(grpc::CallbackServerContext* ctx, const proto::RunGraphRequest* req,
                                     proto::RunGraphResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    RunGraphFromRpc(w_, peers_, req, resp, [r](absl::Status s) { r->Finish(ToGrpcStatus(s)); });
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
    if (req.bundle_keys_size() > 0) return RecvBundle(req, response);
    // The wait ends when the tensor is sent, the step is aborted, or the
    // caller gives up (its deadline, cancel or disconnect): then the waiter
    // leaves the rendezvous, so calls for keys that never come cannot pile up.
    auto* r = new RecvTensorReactor();
    BulkServer* bulk = req.accept_bulk() ? w_->bulk_server() : nullptr;
    // The key ends with the receiving device: the peer this tensor goes to.
    const std::string& key = req.rendezvous_key();
    std::string peer = TaskOfDevice(key.substr(key.rfind(';') == std::string::npos ? 0 : key.rfind(';') + 1));
    w_->rendezvous()->RecvLocalAsync(
        req.step_id(), req.rendezvous_key(), &r->cancel->cm,
        [r, cancel = r->cancel, response, bulk, peer = std::move(peer)](absl::Status s, Tensor t) {
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
    r->Finish(ToGrpcStatus(w_->Heartbeat(*req, resp)));
    return r;
  }

  // A bundle: answered once every key has been sent here (or with the first
  // error) in one response; small tensors inline, large ones (as a single
  // receive would send them) over the bulk port when the caller accepts it.
  grpc::ServerUnaryReactor* RecvBundle(const proto::RecvTensorRequest& req, grpc::ByteBuffer* response) {
    auto* r = new RecvTensorReactor();
    BulkServer* bulk = req.accept_bulk() ? w_->bulk_server() : nullptr;
    struct Bundle {
      absl::Mutex mu;
      std::vector<Tensor> tensors;
      size_t remaining;
      absl::Status status;
    };
    const size_t n = static_cast<size_t>(req.bundle_keys_size());
    auto bundle = std::make_shared<Bundle>();
    bundle->tensors.resize(n);
    bundle->remaining = n;
    const std::string& last = req.bundle_keys(req.bundle_keys_size() - 1);
    std::string peer = TaskOfDevice(last.substr(last.rfind(';') == std::string::npos ? 0 : last.rfind(';') + 1));
    if (req.pushed_keys_size() > 0 || req.pushed_fetch_keys_size() > 0) TakePushed(req, peer, r->cancel);
    for (size_t i = 0; i < n; ++i) {
      w_->rendezvous()->RecvLocalAsync(
          req.step_id(), req.bundle_keys(static_cast<int>(i)), &r->cancel->cm,
          [r, cancel = r->cancel, response, bundle, i, peer, bulk](absl::Status s, Tensor t) {
            bool finish = false;
            {
              absl::MutexLock lock(&bundle->mu);
              if (s.ok()) {
                bundle->tensors[i] = std::move(t);
              } else if (bundle->status.ok()) {
                bundle->status = s;
              }
              finish = --bundle->remaining == 0;
            }
            if (!finish) return;
            if (bundle->status.ok()) {
              std::vector<grpc::ByteBuffer> parts;
              parts.reserve(bundle->tensors.size());
              for (const Tensor& sent : bundle->tensors) {
                CountTensorBytesSent(peer, sent.TotalBytes());
                uint64_t ticket = bulk != nullptr && IsBulkCandidate(sent) ? bulk->Offer(sent) : 0;
                parts.push_back(ticket != 0 ? EncodeBulkTensorHeader(sent, ticket, bulk->port())
                                            : EncodeTensorToByteBuffer(sent));
              }
              *response = EncodeTensorBundle(parts);
            }
            r->Finish(ToGrpcStatus(bundle->status));
          });
    }
    return r;
  }

  // The tensors `peer` pushed with its fetch (RecvTensorRequest.pushed):
  // into this task's rendezvous, as if sent here; the large ones fetched
  // from `peer` first. A malformed push or a failed fetch aborts the step
  // here, so the receives waiting for them fail (and the fetch with them).
  void TakePushed(const proto::RecvTensorRequest& req, const std::string& peer,
                  const std::shared_ptr<RecvTensorReactor::Cancel>& cancel) {
    WorkerRendezvous* rdv = w_->rendezvous();
    const int64_t step = req.step_id();
    if (req.pushed_keys_size() > 0) {
      std::vector<BulkRef> refs;
      absl::StatusOr<std::vector<Tensor>> tensors =
          DecodeTensorBundleFromString(req.pushed(), static_cast<size_t>(req.pushed_keys_size()), &refs);
      if (!tensors.ok()) {
        rdv->AbortStep(step, absl::Status(tensors.status().code(),
                                          absl::StrCat("The ", req.pushed_keys_size(), " tensors ('",
                                                       req.pushed_keys(0), "', ...) pushed by ", peer,
                                                       " could not be read: ", tensors.status().message())));
        return;
      }
      for (int i = 0; i < req.pushed_keys_size(); ++i) {
        const size_t at = static_cast<size_t>(i);
        Tensor& t = (*tensors)[at];
        CountTensorBytesReceived(peer, t.TotalBytes());
        if (at < refs.size() && refs[at].ticket != 0) {
          // A large one: its bytes wait on the peer's bulk port.
          peers_->FetchPushed(peer, req.pushed_keys(i), std::move(t), refs[at], &cancel->cm, w_->compute_pool(),
                              [rdv, step, key = req.pushed_keys(i), cancel](absl::Status s, Tensor got) {
                                if (s.ok()) s = rdv->Send(step, key, got);
                                if (!s.ok()) rdv->AbortStep(step, s);
                              });
          continue;
        }
        // An aborted step refuses it: its receives have failed already.
        (void)rdv->Send(step, req.pushed_keys(i), t);
      }
    }
    for (const std::string& key : req.pushed_fetch_keys()) {
      peers_->RecvTensorAsync(peer, step, key, &cancel->cm, [rdv, step, key, cancel](absl::Status s, Tensor t) {
        if (s.ok()) s = rdv->Send(step, key, t);
        if (!s.ok()) rdv->AbortStep(step, s);
      });
    }
  }

  // Calls without the cluster's token are refused (rpc/auth.h).
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx) {
    return RefuseUnauthenticated(ctx, w_->auth_token(), w_->task_name());
  }

 private:
  Worker* w_;
  WorkerCache* peers_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcWorkerService(Worker* worker, WorkerCache* peers) {
  return std::make_unique<GrpcWorkerService>(worker, peers);
}

}  // namespace distflow
