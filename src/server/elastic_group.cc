// The elastic collective group from a program's side (distflow/elastic.h):
// RebuildElasticGroup and ElasticGroupUpdates, over the task's collective
// executor and the coordinator's GroupRendezvous (group size 0).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "distflow/elastic.h"
#include "distflow/server.h"
#include "server/grpc_server.h"

namespace distflow {

absl::StatusOr<GroupState> GrpcServer::RebuildElasticGroup(absl::Duration timeout) {
  CollectiveExecutorImpl* collective = worker_->collective();
  if (collective == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(task_name_, " runs no collectives"));
  }
  return collective->RebuildNow(0, timeout);
}

absl::StatusOr<proto::GroupRendezvousResponse> GrpcServer::QueryElasticGroup() {
  CollectiveExecutorImpl* collective = worker_->collective();
  if (collective == nullptr || agent_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(task_name_, " has no elastic group: it needs failure detection (heartbeat_timeout_ms above 0)"));
  }
  proto::GroupRendezvousRequest req;
  req.set_job(job_);
  req.set_group_size(0);
  req.set_rank(task_);
  req.set_last_generation(collective->generation(0));
  req.set_query(true);
  proto::GroupRendezvousResponse resp;
  RETURN_IF_ERROR(CallGroupRendezvous(req, &resp));
  return resp;
}

absl::StatusOr<ElasticGroup> RebuildElasticGroup(Server& server, absl::Duration timeout) {
  GrpcServer* impl = server.impl();
  ASSIGN_OR_RETURN(GroupState built, impl->RebuildElasticGroup(timeout));
  absl::StatusOr<DeviceName> me = DeviceName::Parse(impl->task_name());
  if (!me.ok()) return me.status();
  ElasticGroup out;
  out.generation = built.generation;
  for (size_t r = 0; r < built.members.size(); ++r) {
    if (built.members[r] == me->task) out.rank = static_cast<int>(r);
    out.members.push_back(TaskName(me->job, built.members[r]));
  }
  if (out.rank < 0) {
    return absl::InternalError(
        absl::StrCat(impl->task_name(), " is not in the elastic group it built (generation ", built.generation, ")"));
  }
  return out;
}

absl::StatusOr<ElasticGroupChanges> ElasticGroupUpdates(Server& server) {
  GrpcServer* impl = server.impl();
  ASSIGN_OR_RETURN(proto::GroupRendezvousResponse resp, impl->QueryElasticGroup());
  absl::StatusOr<DeviceName> me = DeviceName::Parse(impl->task_name());
  if (!me.ok()) return me.status();
  ElasticGroupChanges out;
  for (int t : resp.pending()) out.waiting.push_back(TaskName(me->job, t));
  for (int t : resp.gone()) out.gone.push_back(TaskName(me->job, t));
  return out;
}

}  // namespace distflow
