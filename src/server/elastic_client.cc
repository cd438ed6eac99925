#include "server/elastic_client.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "coordination/coordination.h"
#include "distflow/auth.h"
#include "distflow/elastic.h"
#include "proto/elastic.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_status.h"

namespace distflow {
namespace {

constexpr auto kCallDeadline = std::chrono::seconds(2);

std::unique_ptr<proto::ElasticService::Stub> StubFor(const std::string& address) {
  return proto::ElasticService::NewStub(NewAuthenticatedChannel(address, UnlimitedChannelArguments(), ClusterToken()));
}

// The coordinator runs no ElasticService when this task is not it.
absl::Status NotTheCoordinator(const std::string& address, const absl::Status& s) {
  return absl::FailedPreconditionError(absl::StrCat(
      "The task at ", address, " keeps no membership (", s.message(),
      "): ask the job's coordinator (the task of a 'coordinator' job, else ps task 0, else the chief), and give "
      "every task "
      "failure detection (--heartbeat_timeout_secs above 0)"));
}

// One Members call, bounded by kCallDeadline; a task that runs no
// ElasticService is named as not the coordinator.
absl::StatusOr<proto::MembersResponse> AskMembers(proto::ElasticService::Stub& stub, const std::string& address) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  proto::MembersResponse resp;
  absl::Status s = FromGrpcStatus(stub.Members(&ctx, proto::MembersRequest(), &resp));
  if (absl::IsUnimplemented(s)) return NotTheCoordinator(address, s);
  RETURN_IF_ERROR(s);
  return resp;
}

absl::StatusOr<std::string> FindAddress(const std::vector<proto::Member>& members, const std::string& task) {
  for (const proto::Member& m : members) {
    if (m.task() == task && !m.address().empty()) return m.address();
  }
  return absl::NotFoundError(absl::StrCat(task, " has not joined the job"));
}

}  // namespace

WorkerCache::AddressResolver JoinedTaskResolver(CoordinationService* local, WorkerCache* peers,
                                                std::string coordinator) {
  return [local, peers, coordinator = std::move(coordinator)](const std::string& task) -> absl::StatusOr<std::string> {
    if (local != nullptr) return FindAddress(local->Members(), task);
    if (task == coordinator) return absl::NotFoundError("the coordinator's own address is in the spec");
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, peers->Channel(coordinator));
    auto stub = proto::ElasticService::NewStub(channel);
    ASSIGN_OR_RETURN(proto::MembersResponse resp, AskMembers(*stub, coordinator));
    return FindAddress({resp.members().begin(), resp.members().end()}, task);
  };
}

absl::StatusOr<JoinedTask> JoinCluster(const std::string& coordinator_address, const std::string& job,
                                       const std::string& address, absl::Duration wait) {
  if (absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(coordinator_address); !hp.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("JoinCluster: the coordinator's address '", coordinator_address, "': ", hp.status().message()));
  }
  auto stub = StubFor(coordinator_address);
  Env* const env = Env::Default();
  auto now = [env] { return absl::FromUnixMicros(env->NowMicros()); };
  const absl::Time deadline = now() + wait;
  proto::JoinRequest req;
  req.set_job(job);
  req.set_address(address);
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    proto::JoinResponse resp;
    absl::Status s = FromGrpcStatus(stub->Join(&ctx, req, &resp));
    if (s.ok()) {
      absl::StatusOr<ClusterSpec> cluster = ClusterSpec::ParseJson(resp.cluster_json());
      if (!cluster.ok()) {
        return absl::DataLossError(
            absl::StrCat("The coordinator at ", coordinator_address,
                         " answered Join with a malformed cluster: ", cluster.status().message()));
      }
      return JoinedTask{resp.task_index(), std::move(*cluster)};
    }
    if (absl::IsUnimplemented(s)) return NotTheCoordinator(coordinator_address, s);
    const bool retry = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
    if (!retry) return s;
    if (now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("Could not join the job: its coordinator at ", coordinator_address,
                                                 " did not answer within ", absl::FormatDuration(wait), " (",
                                                 s.message(), ")"));
    }
    env->SleepForMicros(250'000);
  }
}

absl::StatusOr<std::vector<ClusterMember>> ListClusterMembers(const std::string& coordinator_address) {
  auto stub = StubFor(coordinator_address);
  ASSIGN_OR_RETURN(proto::MembersResponse resp, AskMembers(*stub, coordinator_address));
  std::vector<ClusterMember> out;
  for (const proto::Member& m : resp.members()) {
    out.push_back({m.task(), m.address(), proto::TaskHealth::State_Name(m.state()), m.joined()});
  }
  return out;
}

absl::StatusOr<WorkerShard> LiveWorkerShard(const std::string& coordinator_address, int task_index,
                                            const std::string& job) {
  ASSIGN_OR_RETURN(std::vector<ClusterMember> members, ListClusterMembers(coordinator_address));
  const std::string prefix = absl::StrCat("/job:", job, "/replica:0/task:");
  std::vector<int> live;
  for (const ClusterMember& m : members) {
    int index = -1;
    if (m.state != "ALIVE" && m.state != "UNKNOWN") continue;
    if (absl::StartsWith(m.task, prefix) && absl::SimpleAtoi(m.task.substr(prefix.size()), &index)) {
      live.push_back(index);
    }
  }
  std::sort(live.begin(), live.end());
  auto me = std::find(live.begin(), live.end(), task_index);
  if (me == live.end()) {
    return absl::NotFoundError(absl::StrCat(
        "The coordinator at ", coordinator_address, " does not hold ", TaskName(job, task_index), " as live (it holds ",
        live.size(), " live task(s) of job '", job, "'): it was declared dead or left the job, or never joined it"));
  }
  return WorkerShard{static_cast<int>(me - live.begin()), static_cast<int>(live.size())};
}

std::function<absl::StatusOr<int>()> LiveWorkerCounter(const std::string& coordinator_address, const std::string& job) {
  std::shared_ptr<proto::ElasticService::Stub> stub = StubFor(coordinator_address);
  const std::string prefix = absl::StrCat("/job:", job, "/"), chief = "/job:chief/";
  return [stub, coordinator_address, prefix, chief]() -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(proto::MembersResponse resp, AskMembers(*stub, coordinator_address));
    int live = 0;
    for (const proto::Member& m : resp.members()) {
      if (!absl::StartsWith(m.task(), prefix) && !absl::StartsWith(m.task(), chief)) continue;
      if (m.state() == proto::TaskHealth::ALIVE || m.state() == proto::TaskHealth::UNKNOWN) ++live;
    }
    return live;
  };
}

}  // namespace distflow
