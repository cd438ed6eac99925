#include "rpc/grpc_remote_worker.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/tsan.h"
#include "bulk/bulk_transfer.h"
#include "grpcpp/channel.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/rpc_metrics.h"
#include "rpc/step_stats_proto.h"
#include "rpc/worker_cache.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

// Deadlines of the calls that have none of their own. RegisterGraph's is
// long (building a large partition may take long); the master gives it a
// shorter one where it has a step timeout, and cancels it when the task dies.
constexpr auto kGetStatusDeadline = std::chrono::seconds(1);
constexpr auto kRegisterGraphDeadline = std::chrono::seconds(120);
constexpr auto kCleanupDeadline = std::chrono::seconds(5);

// `opts`'s timeout, or `fallback` without one.
std::chrono::system_clock::time_point DeadlineOf(const CallOptions* opts, std::chrono::milliseconds fallback) {
  const absl::Duration timeout = opts != nullptr ? opts->timeout() : absl::ZeroDuration();
  return std::chrono::system_clock::now() +
         (timeout > absl::ZeroDuration() ? absl::ToChronoMilliseconds(timeout) : fallback);
}

template <typename Req, typename Resp>
struct Unary {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
};

// Ends a call: drops the caller's hold on its context (and so on the
// channel) before telling the caller, so that a caller who exits at once
// (AskTasks in ShutdownCluster, at the end of a program) leaves no gRPC
// object to be destroyed on gRPC's thread after it.
template <typename Call, typename Done>
void FinishAfterRelease(std::shared_ptr<Call> call, Done done, absl::Status status) {
  call.reset();
  done(std::move(status));
}

// The fetched tensors of a RunGraph answer into `call->recv`: decoded, or
// read from the worker's bulk port (which blocks).
absl::Status ReadFetches(WorkerCache* cache, const std::string& task, const proto::RunGraphResponse& resp,
                         RunGraphCall* call) {
  call->recv.clear();
  call->recv.reserve(resp.recv_size());
  for (const proto::NamedTensor& nt : resp.recv()) {
    absl::StatusOr<Tensor> t;
    if (nt.bulk_ticket() != 0) {
      absl::StatusOr<std::pair<DataType, TensorShape>> spec = BulkTensorSpec(nt);
      t = spec.ok() ? Tensor::Allocate(spec->first, spec->second) : absl::StatusOr<Tensor>(spec.status());
      if (t.ok()) {
        absl::Status s = cache->FetchBulkInto(task, nt.bulk_ticket(), nt.bulk_port(), &*t, nullptr);
        if (!s.ok()) t = s;
      }
    } else {
      t = DecodeTensor(nt.tensor());
    }
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("Fetch '", nt.name(), "' from ", task, ": ", t.status().message()));
    }
    CountTensorBytesReceived(TaskOfDevice(task), t->TotalBytes());
    call->recv.push_back(std::move(*t));
  }
  if (call->recv.size() != call->recv_keys.size()) {
    return absl::DataLossError(absl::StrCat(task, " answered RunGraph with ", call->recv.size(), " tensors for ",
                                            call->recv_keys.size(), " fetches"));
  }
  return absl::OkStatus();
}

}  // namespace

struct GrpcRemoteWorker::Rpc {
  std::unique_ptr<proto::WorkerService::Stub> stub;
};

GrpcRemoteWorker::GrpcRemoteWorker(std::string task, std::shared_ptr<grpc::Channel> channel, WorkerCache* cache)
    : task_(std::move(task)), cache_(cache), rpc_(std::make_unique<Rpc>()) {
  rpc_->stub = proto::WorkerService::NewStub(channel);
}

GrpcRemoteWorker::~GrpcRemoteWorker() = default;

void GrpcRemoteWorker::GetStatusAsync(CallOptions* opts, proto::GetStatusResponse* resp, StatusCallback done) {
  auto call = std::make_shared<Unary<proto::GetStatusRequest, proto::GetStatusResponse>>();
  call->ctx.set_deadline(DeadlineOf(opts, kGetStatusDeadline));
  DF_TSAN_HANDOFF(call.get());
  rpc_->stub->async()->GetStatus(&call->ctx, &call->req, &call->resp,
                                 [call, resp, done = std::move(done)](grpc::Status s) mutable {
                                   DF_TSAN_RECEIVE(call.get());
                                   if (s.ok()) resp->Swap(&call->resp);
                                   FinishAfterRelease(std::move(call), std::move(done), FromGrpcStatus(s));
                                 });
}

void GrpcRemoteWorker::RegisterGraphAsync(CallOptions* opts, const proto::RegisterGraphRequest* req,
                                          proto::RegisterGraphResponse* resp, StatusCallback done) {
  auto ctx = std::make_shared<grpc::ClientContext>();
  const absl::Duration timeout = opts != nullptr ? opts->timeout() : absl::ZeroDuration();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    (timeout > absl::ZeroDuration() ? absl::ToChronoMilliseconds(timeout) : kRegisterGraphDeadline));
  if (opts != nullptr) opts->SetCancelCallback([ctx] { ctx->TryCancel(); });
  DF_TSAN_HANDOFF(ctx.get());
  rpc_->stub->async()->RegisterGraph(ctx.get(), req, resp,
                                     [this, ctx, opts, resp, done = std::move(done)](grpc::Status s) {
                                       DF_TSAN_RECEIVE(ctx.get());
                                       if (opts != nullptr) opts->ClearCancelCallback();
                                       if (s.ok()) accepts_bulk_.store(resp->accepts_bulk());
                                       done(FromGrpcStatus(s));
                                     });
}

void GrpcRemoteWorker::DeregisterGraphAsync(const proto::DeregisterGraphRequest* req, StatusCallback done) {
  auto call = std::make_shared<Unary<proto::DeregisterGraphRequest, proto::DeregisterGraphResponse>>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + kCleanupDeadline);
  call->req = *req;
  DF_TSAN_HANDOFF(call.get());
  rpc_->stub->async()->DeregisterGraph(&call->ctx, &call->req, &call->resp,
                                       [call, done = std::move(done)](grpc::Status s) {
                                         DF_TSAN_RECEIVE(call.get());
                                         done(FromGrpcStatus(s));
                                       });
}

void GrpcRemoteWorker::CleanupGraphAsync(const proto::CleanupGraphRequest* req, StatusCallback done) {
  auto call = std::make_shared<Unary<proto::CleanupGraphRequest, proto::CleanupGraphResponse>>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + kCleanupDeadline);
  call->req = *req;
  DF_TSAN_HANDOFF(call.get());
  rpc_->stub->async()->CleanupGraph(&call->ctx, &call->req, &call->resp,
                                    [call, done = std::move(done)](grpc::Status s) {
                                      DF_TSAN_RECEIVE(call.get());
                                      done(FromGrpcStatus(s));
                                    });
}

void GrpcRemoteWorker::CleanupAllAsync(CallOptions* opts, const proto::CleanupAllRequest* req, StatusCallback done) {
  auto call = std::make_shared<Unary<proto::CleanupAllRequest, proto::CleanupAllResponse>>();
  call->ctx.set_deadline(DeadlineOf(opts, kCleanupDeadline));
  call->req = *req;
  DF_TSAN_HANDOFF(call.get());
  rpc_->stub->async()->CleanupAll(&call->ctx, &call->req, &call->resp,
                                  [call, done = std::move(done)](grpc::Status s) mutable {
                                    DF_TSAN_RECEIVE(call.get());
                                    FinishAfterRelease(std::move(call), std::move(done), FromGrpcStatus(s));
                                  });
}

void GrpcRemoteWorker::ShutdownAsync(CallOptions* opts, const proto::ShutdownRequest* req, StatusCallback done) {
  auto call = std::make_shared<Unary<proto::ShutdownRequest, proto::ShutdownResponse>>();
  call->ctx.set_deadline(DeadlineOf(opts, kCleanupDeadline));
  call->req = *req;
  DF_TSAN_HANDOFF(call.get());
  rpc_->stub->async()->Shutdown(&call->ctx, &call->req, &call->resp,
                                [call, done = std::move(done)](grpc::Status s) mutable {
                                  DF_TSAN_RECEIVE(call.get());
                                  FinishAfterRelease(std::move(call), std::move(done), FromGrpcStatus(s));
                                });
}

void GrpcRemoteWorker::RunGraphAsync(CallOptions* opts, RunGraphCall* call, StatusCallback done) {
  auto rpc = std::make_shared<Unary<proto::RunGraphRequest, proto::RunGraphResponse>>();
  proto::RunGraphRequest& req = rpc->req;
  req.set_graph_handle(call->graph_handle);
  req.set_step_id(call->step_id);
  req.set_timeout_ms(call->timeout_ms);
  req.set_master_task(call->master_task);
  BulkServer* local_bulk = cache_->local_bulk_server();
  req.set_accept_bulk(local_bulk != nullptr && cache_->bulk_enabled());
  req.set_trace(call->trace);
  // Large feeds wait on our bulk port for the worker to read them.
  BulkServer* feed_bulk = accepts_bulk_.load() ? local_bulk : nullptr;
  for (const auto& [name, t] : call->send) {
    CountTensorBytesSent(TaskOfDevice(task_), t.TotalBytes());  // fed tensors are the step's traffic too
    proto::NamedTensor* nt = req.add_send();
    const uint64_t ticket = feed_bulk != nullptr && IsBulkCandidate(t) ? feed_bulk->Offer(t) : 0;
    if (ticket != 0) {
      SetBulkNamedTensor(name, t, ticket, feed_bulk->port(), nt);
      continue;
    }
    nt->set_name(name);
    EncodeTensor(t, nt->mutable_tensor());
  }
  for (const std::string& k : call->recv_keys) req.add_recv_key(k);
  for (const std::string& t : call->targets) req.add_target(t);
  if (opts != nullptr) opts->SetCancelCallback([rpc] { rpc->ctx.TryCancel(); });
  DF_TSAN_HANDOFF(rpc.get());
  rpc_->stub->async()->RunGraph(
      &rpc->ctx, &rpc->req, &rpc->resp,
      [rpc, opts, call, cache = cache_, task = task_, done = std::move(done)](grpc::Status s) mutable {
        DF_TSAN_RECEIVE(rpc.get());
        if (opts != nullptr) opts->ClearCancelCallback();
        if (!s.ok()) return done(FromGrpcStatus(s));
        if (call->trace) AppendStepStats(rpc->resp.step_stats(), &call->stats);
        bool bulk_fetches = false;
        for (const proto::NamedTensor& nt : rpc->resp.recv()) bulk_fetches |= nt.bulk_ticket() != 0;
        if (!bulk_fetches) return done(ReadFetches(cache, task, rpc->resp, call));
        // Not on gRPC's thread: the bulk reads block.
        cache->RunOnBulkPool(
            [rpc, call, cache, task, done = std::move(done)] { done(ReadFetches(cache, task, rpc->resp, call)); });
      });
}

void GrpcRemoteWorker::RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                                       Rendezvous::DoneCallback done) {
  cache_->RecvTensorAsync(task_, step_id, key, cm, std::move(done));
}

}  // namespace distflow
