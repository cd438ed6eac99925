#include "server/grpc_elastic_service.h"

#include "absl/strings/str_cat.h"
#include "coordination/coordination.h"
#include "proto/elastic.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_status.h"
#include "rpc/worker_cache.h"

namespace distflow {
namespace {

class GrpcElasticService final : public proto::ElasticService::CallbackService {
 public:
  GrpcElasticService(CoordinationService* service, WorkerCache* workers, std::string token, std::string task)
      : service_(service), workers_(workers), token_(std::move(token)), task_(std::move(task)) {}

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const proto::JoinRequest* req,
                                 proto::JoinResponse* resp) override {
    if (auto* refused = RefuseUnauthenticated(ctx, token_, task_)) return refused;
    ClusterSpec cluster;
    absl::StatusOr<int> index = service_->Join(req->job(), req->address(), &cluster);
    if (index.ok()) {
      // This task may have to reach the joiner (a ps receives its gradients).
      workers_->SetTaskAddress(TaskName(req->job(), *index), req->address());
      resp->set_task_index(*index);
      resp->set_cluster_json(cluster.ToJson());
    }
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(index.status()));
    return r;
  }

  grpc::ServerUnaryReactor* Rejoin(grpc::CallbackServerContext* ctx, const proto::RejoinRequest* req,
                                   proto::RejoinResponse*) override {
    if (auto* refused = RefuseUnauthenticated(ctx, token_, task_)) return refused;
    absl::Status s = service_->Rejoin(req->task(), req->address());
    if (s.ok()) workers_->SetTaskAddress(req->task(), req->address());
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(s));
    return r;
  }

  grpc::ServerUnaryReactor* GroupRendezvous(grpc::CallbackServerContext* ctx, const proto::GroupRendezvousRequest* req,
                                            proto::GroupRendezvousResponse* resp) override {
    if (auto* refused = RefuseUnauthenticated(ctx, token_, task_)) return refused;
    auto* r = ctx->DefaultReactor();
    r->Finish(ToGrpcStatus(service_->GroupRendezvous(*req, resp)));
    return r;
  }

  grpc::ServerUnaryReactor* Members(grpc::CallbackServerContext* ctx, const proto::MembersRequest*,
                                    proto::MembersResponse* resp) override {
    if (auto* refused = RefuseUnauthenticated(ctx, token_, task_)) return refused;
    for (proto::Member& m : service_->Members()) *resp->add_members() = std::move(m);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  CoordinationService* const service_;
  WorkerCache* const workers_;
  const std::string token_;
  const std::string task_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcElasticService(CoordinationService* service, WorkerCache* workers,
                                                     std::string auth_token, std::string task_name) {
  return std::make_unique<GrpcElasticService>(service, workers, std::move(auth_token), std::move(task_name));
}

}  // namespace distflow
