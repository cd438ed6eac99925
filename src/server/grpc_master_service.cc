#include "server/grpc_master_service.h"

#include "absl/status/status.h"
#include "base/metrics.h"
#include "master/master.h"
#include "proto/master.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_status.h"

namespace distflow {
namespace {

class GrpcMasterService final : public proto::MasterService::CallbackService {
 public:
  explicit GrpcMasterService(Master* m) : m_(m) {}

  // The work captures the Master, not the service: it runs on the master's
  // pool, which the Master joins.
  template <typename Fn>
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* ctx, Fn fn) {
    auto* r = ctx->DefaultReactor();
    m_->pool()->Schedule([r, fn = std::move(fn)]() mutable { r->Finish(ToGrpcStatus(fn())); });
    return r;
  }

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx, const proto::CreateSessionRequest* req,
                                          proto::CreateSessionResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    return Offload(ctx, [m = m_, ctx, req, resp] {
      absl::Status s = m->CreateSession(*req, resp);
      // A client that gave up while the master waited for the cluster (its
      // deadline, or its Close) will never use nor close this session.
      if (s.ok() && ctx->IsCancelled()) {
        (void)m->CloseSession(resp->session_handle());
        Metrics::Global()
            ->GetCounter("distflow_sessions_abandoned_total",
                         "Sessions the master closed as soon as it had made them, their client having stopped "
                         "waiting (its deadline passed, or it closed the session)")
            ->Increment();
        return absl::CancelledError("the client stopped waiting for its session");
      }
      return s;
    });
  }
  grpc::ServerUnaryReactor* ExtendSession(grpc::CallbackServerContext* ctx, const proto::ExtendSessionRequest* req,
                                          proto::ExtendSessionResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    return Offload(ctx, [m = m_, req] { return m->ExtendSession(*req); });
  }
  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* ctx, const proto::RunStepRequest* req,
                                    proto::RunStepResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    auto* r = ctx->DefaultReactor();
    m_->RunStepAsync(req, resp, [ctx, r](absl::Status s) {
      if (!s.ok()) ctx->AddTrailingMetadata(kStepStatusMetadataKey, "1");
      r->Finish(ToGrpcStatus(s));
    });
    return r;
  }
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx, const proto::CloseSessionRequest* req,
                                         proto::CloseSessionResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    return Offload(ctx, [m = m_, req] { return m->CloseSession(req->session_handle()); });
  }
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx, const proto::ListDevicesRequest*,
                                        proto::ListDevicesResponse* resp) override {
    if (auto* refused = Refuse(ctx)) return refused;
    return Offload(ctx, [m = m_, resp] { return m->ListDevices(resp); });
  }
  grpc::ServerUnaryReactor* Reset(grpc::CallbackServerContext* ctx, const proto::ResetRequest* req,
                                  proto::ResetResponse*) override {
    if (auto* refused = Refuse(ctx)) return refused;
    return Offload(ctx, [m = m_, req] { return m->Reset(*req); });
  }

  // Calls without the cluster's token are refused (rpc/auth.h).
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx) {
    return RefuseUnauthenticated(ctx, m_->auth_token(), m_->local_task());
  }

 private:
  Master* m_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcMasterService(Master* master) {
  return std::make_unique<GrpcMasterService>(master);
}

}  // namespace distflow
