#include "launcher_tasks.h"

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "base/ports.h"

namespace distflow {

namespace {

bool Discovery(const LaunchOptions& options) { return !options.host_discovery_script.empty(); }

}  // namespace

bool Elastic(const ClusterSpec& cluster, const LaunchOptions& options) {
  return options.join_workers > 0 || Discovery(options) || cluster.HasJob(kCoordinatorJob);
}

std::string CoordinatorAddress(const ClusterSpec& cluster, const LaunchOptions& options) {
  if (!Elastic(cluster, options)) return "";
  const std::string job = cluster.HasJob(kCoordinatorJob) ? kCoordinatorJob : cluster.HasJob("ps") ? "ps" : "worker";
  return cluster.HasJob(job) ? cluster.task_address(job, cluster.task_indices(job).front()).value_or("") : "";
}

std::vector<LaunchedTask> PlanTasks(const ClusterSpec& cluster, const LaunchOptions& options) {
  std::vector<LaunchedTask> tasks;
  const std::vector<std::string>& program = options.program;
  const std::string& ps_program = options.ps_program;
  const int status_base_port = options.status_base_port;
  const std::string spec = cluster.ToFlagString().value_or(cluster.ToJson());
  for (const auto& [job, indices] : cluster.job_map()) {
    for (const auto& [index, address] : indices) {
      if (!options.only_host.empty()) {
        absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
        if (!hp.ok() || hp->first != options.only_host) continue;  // another machine's launcher runs it
      }
      LaunchedTask t;
      t.job = job;
      t.index = index;
      t.address = address;
      const bool server = job == "ps" || job == kCoordinatorJob;
      t.argv = server ? std::vector<std::string>{ps_program} : program;
      t.argv.push_back("--job_name=" + job);
      t.argv.push_back(absl::StrCat("--task_index=", index));
      t.argv.push_back("--cluster_spec=" + spec);
      if (server && !options.shared_memory && absl::EndsWith(ps_program, "distflow-server")) {
        t.argv.push_back("--shared_memory=false");
      }
      if (job == kCoordinatorJob && absl::EndsWith(ps_program, "distflow-server")) {
        t.argv.insert(t.argv.end(), options.coordinator_flags.begin(), options.coordinator_flags.end());
      }
      if (status_base_port > 0) {
        const int port = status_base_port + static_cast<int>(tasks.size());
        t.argv.push_back(absl::StrCat("--status_port=", port));
        absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
        t.status_url = absl::StrCat("http://", hp.ok() ? hp->first : "127.0.0.1", ":", port, "/status");
      }
      if (Discovery(options) && job != "ps") {
        absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
        if (hp.ok()) t.host = hp->first;
      }
      tasks.push_back(std::move(t));
    }
  }
  if (options.evaluator) {
    // Not a task of the spec (TF_CONFIG's evaluator): no address, no server.
    LaunchedTask t;
    t.job = "evaluator";
    t.argv = program;
    t.argv.push_back("--job_name=evaluator");
    t.argv.push_back("--task_index=0");
    t.argv.push_back("--cluster_spec=" + spec);
    tasks.push_back(std::move(t));
  }
  if (Elastic(cluster, options)) {
    for (int i = 1; i <= options.join_workers; ++i) {
      LaunchedTask t;
      t.job = "worker";
      t.index = i;  // the launcher's count; the coordinator gives the task index
      t.joins = true;
      t.argv = program;
      tasks.push_back(std::move(t));
    }
  }
  return tasks;
}

}  // namespace distflow
