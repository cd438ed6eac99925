#include "distflow/server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "rpc/worker_cache.h"
#include "server/grpc_server.h"
#include "server/grpc_session.h"

namespace distflow {

Server::Server(std::unique_ptr<GrpcServer> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ClusterSpec& cluster, const std::string& job,
                                                       int task_index, ServerOptions options) {
  // A program with a server opens grpc:// sessions (runtime/session_factory.h).
  RegisterGrpcSessionFactory();
  ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> impl, GrpcServer::Create(cluster, job, task_index, std::move(options)));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

absl::Status Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
void Server::Join() { impl_->Join(); }
std::string Server::target() const { return impl_->target(); }
const std::string& Server::task_name() const { return impl_->task_name(); }
ClusterSpec Server::cluster() const { return impl_->cluster(); }
int Server::port() const { return impl_->port(); }
int Server::bulk_port() const { return impl_->bulk_port(); }
int Server::status_port() const { return impl_->status_port(); }
std::vector<std::string> Server::DeadTasks() const { return impl_->DeadTasks(); }
absl::Status Server::exit_status() const { return impl_->exit_status(); }

absl::StatusOr<std::vector<std::unique_ptr<Server>>> StartLocalCluster(const ClusterSpec& cluster,
                                                                       ServerOptions options) {
  // A task bound to port 0 would learn its port alone, and the others could
  // not reach it: pick the ports here, before any task starts, so that every
  // task is given them.
  ClusterSpec::JobMap jobs = cluster.job_map();
  for (auto& [job, tasks] : jobs) {
    for (auto& [t, address] : tasks) {
      absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
      if (!hp.ok() || hp->second != 0) continue;
      ASSIGN_OR_RETURN(int port, Env::Default()->PickUnusedPort());
      address = absl::StrCat(hp->first.find(':') != std::string::npos ? absl::StrCat("[", hp->first, "]") : hp->first,
                             ":", port);
    }
  }
  ASSIGN_OR_RETURN(ClusterSpec picked, ClusterSpec::FromJobs(jobs));
  ClusterSpec spec = picked;
  std::vector<std::unique_ptr<Server>> servers;
  for (const std::string& job : cluster.jobs()) {
    for (int t : cluster.task_indices(job)) {
      for (int attempt = 0;; ++attempt) {
        ASSIGN_OR_RETURN(std::unique_ptr<Server> s, Server::Create(spec, job, t, options));
        absl::Status started = s->Start();
        if (started.ok()) {
          servers.push_back(std::move(s));
          break;
        }
        // A port picked in advance (MakeLocalClusterSpec) can be taken before
        // its server binds it, e.g. by another server's bulk port: pick
        // another and tell the servers already running.
        absl::StatusOr<std::string> old = spec.task_address(job, t);
        absl::StatusOr<std::pair<std::string, int>> hp =
            old.ok() ? SplitHostPort(*old) : absl::StatusOr<std::pair<std::string, int>>(old.status());
        absl::StatusOr<int> port = Env::Default()->PickUnusedPort();
        if (!absl::IsUnavailable(started) || attempt >= 4 || !hp.ok() || !port.ok()) return started;
        std::string address = absl::StrCat(hp->first, ":", *port);
        ClusterSpec::JobMap jobs = spec.job_map();
        jobs[job][t] = address;
        ASSIGN_OR_RETURN(ClusterSpec updated, ClusterSpec::FromJobs(jobs));
        spec = updated;
        for (auto& running : servers) running->impl()->SetPeerAddress(job, t, address);
      }
    }
  }
  return servers;
}

}  // namespace distflow
