// Task configuration: which task of which cluster this process is, resolved
// from every place a distflow program can be told it.
//
//   1. command-line flags: --cluster_spec, --job_name, --task_index (alias
//      --task_id);
//   2. a --cluster_config file and the DISTFLOW_CONFIG environment variable,
//      both TF_CONFIG-shaped: {"cluster": {...}, "task": {"type": J, "index": I}};
//   3. a rank from the process manager (SLURM_PROCID, OMPI_COMM_WORLD_RANK or
//      PMI_RANK) placed by --job_layout=ps:1,worker:3: ranks are handed out in
//      the layout's order, so rank 0 is /job:ps/task:0 and ranks 1..3 are
//      /job:worker/task:0..2.
//
// Every source that states the cluster, the job or the task index must state
// the same one; two that disagree are an error naming both. A layout must
// match the cluster job for job and count for count. The resolved cluster is
// checked to be servable (a fixed, distinct address per task) and to hold
// the task. Every failure is an InvalidArgument (NotFound for an unreadable
// --cluster_config) whose message names the source, what was expected and
// the fix; the programs print it and exit 2.
//
// The environment is read only through the `EnvLookup` passed in, and files
// only through the `Env`, so tests never set real environment variables.
//
// Typical use in a program's main():
//   TaskConfigFlags flags;
//   flags.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);  // ... and the rest
//   absl::StatusOr<TaskConfig> task = ResolveTaskConfig(flags, ProcessEnvironment());
//   if (!task.ok()) return Fail(2, task.status().message());
//
// Thread-safety: free functions over values, safe to call concurrently as
// long as the EnvLookup and Env passed in are.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distflow/cluster_spec.h"
#include "distflow/export.h"

namespace distflow {

class Env;

// An environment variable's value; nullopt if it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real process environment (std::getenv).
DISTFLOW_EXPORT EnvLookup ProcessEnvironment();

// The variables a rank is read from, in the order they are consulted.
inline constexpr const char* kRankVariables[] = {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

// The command-line flags of a program, as given ("" where not given). Index
// flags are strings so that a value that is not a number is a clear error.
struct DISTFLOW_EXPORT TaskConfigFlags {
  std::string cluster_spec;
  // How messages name the flag(s) the cluster text came from (a program may
  // build it from other flags, e.g. "--ps_hosts/--worker_hosts").
  std::string cluster_spec_flag = "--cluster_spec";
  std::string job_name;
  std::string task_index;
  std::string task_id;         // alias of task_index; both given must agree
  std::string cluster_config;  // path of a TF_CONFIG-shaped JSON file
  std::string job_layout;      // "ps:1,worker:3"
};

// What a program assumes where no source says anything (the book's example
// runs as worker 0 of a fixed cluster). Unset parts stay required.
struct DISTFLOW_EXPORT TaskConfigDefaults {
  std::optional<ClusterSpec> cluster;
  std::string job;
  std::optional<int> task_index;
};

struct DISTFLOW_EXPORT TaskConfig {
  ClusterSpec cluster;
  std::string job;
  int task_index = 0;
  // When a rank placed this task: "--job_layout=ps:1,worker:3 with SLURM_PROCID=1";
  // empty otherwise.
  std::string placed_by;
};

// A parsed --job_layout: (job, task count) in rank order.
using JobLayout = std::vector<std::pair<std::string, int>>;

// Parses "JOB:COUNT,JOB:COUNT,..." (counts >= 1, each job once, job names as
// in a cluster spec). InvalidArgument naming the bad entry otherwise.
DISTFLOW_EXPORT absl::StatusOr<JobLayout> ParseJobLayout(absl::string_view text);

// Resolves this process's cluster and task from `flags`, the variables
// DISTFLOW_CONFIG and kRankVariables read through `getenv`, the file named
// by flags.cluster_config read through `env` (Env::Default() if null), and
// `defaults` where nothing else says.
DISTFLOW_EXPORT absl::StatusOr<TaskConfig> ResolveTaskConfig(const TaskConfigFlags& flags, const EnvLookup& getenv,
                                                             const TaskConfigDefaults& defaults = {},
                                                             Env* env = nullptr);

}  // namespace distflow
