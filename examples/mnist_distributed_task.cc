// Which task this process of mnist_distributed is, and the cluster: from
// the flags, the environment, or a running job's coordinator (--join).
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "distflow/elastic.h"
#include "distflow/status.h"
#include "mnist_distributed_common.h"
#include "mnist_distributed_flags.h"

namespace df = distflow;

namespace mnist_distributed {
namespace {

// The book's cluster in flag form, with the tasks of --ps_hosts/--worker_hosts where given.
std::string BookCluster(std::string ps, std::string workers) {
  if (ps.empty()) ps = "localhost:2222";
  if (workers.empty()) workers = "localhost:2223,localhost:2224,localhost:2225";
  return absl::StrCat("ps|", absl::StrJoin(absl::StrSplit(ps, ','), ";"), ",worker|",
                      absl::StrJoin(absl::StrSplit(workers, ','), ";"));
}

}  // namespace

// This task and its cluster (see cluster/task_config.cc): the cluster from
// --cluster_spec or --ps_hosts/--worker_hosts, the task from --job_name and
// --task_index, DISTFLOW_CONFIG, or a rank placed by --job_layout; the book's
// cluster and worker 0 where nothing says.
absl::StatusOr<df::TaskConfig> ResolveTask() {
  df::TaskConfigFlags flags;
  flags.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);
  const std::string ps = absl::GetFlag(FLAGS_ps_hosts), workers = absl::GetFlag(FLAGS_worker_hosts);
  if (!ps.empty() || !workers.empty()) {
    if (!flags.cluster_spec.empty()) {
      return absl::InvalidArgumentError("give either --cluster_spec or --ps_hosts/--worker_hosts, not both");
    }
    flags.cluster_spec = BookCluster(ps, workers);
    flags.cluster_spec_flag = "--ps_hosts/--worker_hosts";
  }
  flags.job_name = absl::GetFlag(FLAGS_job_name);
  flags.task_index = absl::GetFlag(FLAGS_task_index);
  flags.job_layout = absl::GetFlag(FLAGS_job_layout);
  df::TaskConfigDefaults defaults;
  defaults.cluster = *df::ClusterSpec::Parse(BookCluster("", ""));
  defaults.job = "worker";
  defaults.task_index = 0;
  return df::ResolveTaskConfig(flags, df::ProcessEnvironment(), defaults);
}

// A worker joining a running job (--join): its task and the cluster come
// from the job's coordinator.
absl::StatusOr<df::TaskConfig> JoinRunningJob() {
  const std::string job = absl::GetFlag(FLAGS_job_name);
  if (!job.empty() && job != "worker") {
    return absl::InvalidArgumentError(absl::StrCat("--join starts a worker; drop --job_name=", job));
  }
  if (!absl::GetFlag(FLAGS_task_index).empty()) {
    return absl::InvalidArgumentError("--join takes the task index from the coordinator; drop --task_index");
  }
  if (absl::GetFlag(FLAGS_join_as).empty()) {
    return absl::InvalidArgumentError("--join needs --join_as=host:port, the address this worker serves on");
  }
  DF_ASSIGN_OR_RETURN(df::JoinedTask me, df::JoinCluster(absl::GetFlag(FLAGS_join), "worker",
                                                         absl::GetFlag(FLAGS_join_as), absl::Seconds(60)));
  df::TaskConfig config;
  config.cluster = std::move(me.cluster);
  config.job = "worker";
  config.task_index = me.task_index;
  config.placed_by = absl::StrCat("the coordinator at ", absl::GetFlag(FLAGS_join), ": joined the running job");
  return config;
}

// The workers that joined the running job and are still in it, as the
// coordinator says ("" entries when it cannot be asked).
std::vector<std::string> JoinedWorkersStillIn(const std::string& coordinator, int* joined_total) {
  std::vector<std::string> in;
  absl::StatusOr<std::vector<df::ClusterMember>> members = df::ListClusterMembers(coordinator);
  if (!members.ok()) return in;
  int total = 0;
  for (const df::ClusterMember& m : *members) {
    if (!m.joined || !absl::StartsWith(m.task, "/job:worker/")) continue;
    ++total;
    if (m.state == "ALIVE") in.push_back(m.task);
  }
  *joined_total = std::max(*joined_total, total);
  return in;
}

}  // namespace mnist_distributed
