// ClusterSpec: the set of jobs in a distributed cluster, each a set of tasks
// (index -> "host:port"), parsed from the --cluster_spec flag or from JSON.
//
// Flag form:  ps|h0:2222;h1:2222,worker|h2:2222
//   jobs separated by ',', a job's name and its tasks by '|', tasks by ';';
//   tasks are numbered 0..n-1; "ps|" is a job with no tasks. Each job entry
//   may be wrapped in matching single or double quotes (what a shell leaves
//   of 'ps|a:1','wk|b:2'); whitespace around the whole text and around each
//   job entry is ignored.
// JSON form:  {"ps": ["h0:2222"], "worker": {"0": "a:1", "3": "b:2"}}
//   a job is a list (tasks 0..n-1) or an object mapping decimal task index
//   strings to addresses (sparse jobs); [] and {} are empty jobs.
//
// Addresses are HOST:PORT with HOST a name/IPv4 ([A-Za-z0-9._-]+) or a
// bracketed IPv6 literal ("[::1]") and PORT a decimal in [0, 65535].
//
// Every error is an absl::Status (InvalidArgument naming the offending part);
// nothing throws or aborts on any input.
//
// Typical use in a server binary:
//   ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::Parse(flag_cluster_spec));
//   RETURN_IF_ERROR(cluster.ValidateTask(flag_job_name, flag_task_index));
//   ASSIGN_OR_RETURN(std::string bind, cluster.task_address(job, index));
//
// Thread-safety: value type (thread-compatible); const methods may be called
// concurrently.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distflow/export.h"

namespace distflow {

// Splits "host:port" / "[v6]:port" into (host, port); the host is returned
// without IPv6 brackets. InvalidArgument for anything malformed (see above).
DISTFLOW_EXPORT absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address);

class DISTFLOW_EXPORT ClusterSpec {
 public:
  // job name -> (task index -> address).
  using JobMap = std::map<std::string, std::map<int, std::string>>;

  ClusterSpec() = default;  // no jobs

  // Validates names, indices and addresses of `jobs` (which must be non-empty).
  static absl::StatusOr<ClusterSpec> FromJobs(JobMap jobs);

  // Auto-detects JSON (first non-space character '{') or the flag form.
  static absl::StatusOr<ClusterSpec> Parse(absl::string_view text);
  static absl::StatusOr<ClusterSpec> ParseFlagForm(absl::string_view text);
  static absl::StatusOr<ClusterSpec> ParseJson(absl::string_view text);

  // Flag form, jobs in name order. InvalidArgument if a job is sparse (task
  // indices not exactly 0..n-1), which the flag form cannot express.
  absl::StatusOr<std::string> ToFlagString() const;
  // Compact JSON, jobs in name order; dense jobs as lists, sparse as objects.
  std::string ToJson() const;

  // Job names, sorted.
  std::vector<std::string> jobs() const;
  bool HasJob(absl::string_view job) const;
  // Number of tasks defined in `job` (0 if the job is unknown).
  int num_tasks(absl::string_view job) const;
  // Task indices of `job`, ascending (empty if the job is unknown).
  std::vector<int> task_indices(absl::string_view job) const;
  // InvalidArgument (as ValidateTask) if the job or task does not exist.
  absl::StatusOr<std::string> task_address(absl::string_view job, int task_index) const;
  bool HasTask(absl::string_view job, int task_index) const;
  // Every task's TaskName(), in job-name then index order.
  std::vector<std::string> AllTaskNames() const;
  const JobMap& job_map() const { return jobs_; }

  // Checks --job_name/--task_index against the cluster: an unknown job is
  // InvalidArgument listing the jobs; a missing index one listing the valid
  // indices of that job.
  absl::Status ValidateTask(absl::string_view job_name, int task_index) const;

  friend bool operator==(const ClusterSpec& a, const ClusterSpec& b) { return a.jobs_ == b.jobs_; }
  friend bool operator!=(const ClusterSpec& a, const ClusterSpec& b) { return !(a == b); }

 private:
  explicit ClusterSpec(JobMap jobs) : jobs_(std::move(jobs)) {}

  JobMap jobs_;
};

// The canonical name of a task, "/job:ps/replica:0/task:1" for ("ps", 1): the
// one spelling that logs, errors, metrics and device names use. Input may
// also say "/job:ps/task:1" (DeviceName parses both).
DISTFLOW_EXPORT std::string TaskName(absl::string_view job, int task_index);

}  // namespace distflow
