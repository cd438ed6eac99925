#include "rpc/coordinator_client.h"

#include <chrono>
#include <memory>

#include "base/status_macros.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/elastic.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/worker_cache.h"

namespace distflow {

absl::Status CoordinatorHeartbeat(WorkerCache* peers, const std::string& coordinator,
                                  const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp,
                                  absl::Duration timeout) {
  ASSIGN_OR_RETURN(proto::WorkerService::Stub * stub, peers->Stub(coordinator));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  return FromGrpcStatus(stub->Heartbeat(&ctx, req, resp));
}

absl::Status CoordinatorRejoin(WorkerCache* peers, const std::string& coordinator, const proto::RejoinRequest& req,
                               absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, peers->Channel(coordinator));
  auto stub = proto::ElasticService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  proto::RejoinResponse resp;
  return FromGrpcStatus(stub->Rejoin(&ctx, req, &resp));
}

absl::Status CoordinatorGroupRendezvous(WorkerCache* peers, const std::string& coordinator,
                                        const proto::GroupRendezvousRequest& req, proto::GroupRendezvousResponse* resp,
                                        absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, peers->Channel(coordinator));
  auto stub = proto::ElasticService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  return FromGrpcStatus(stub->GroupRendezvous(&ctx, req, resp));
}

}  // namespace distflow
