// The tasks a launcher (launcher.cc) runs, and how it plans them from the
// cluster spec and its options before any starts: the spec's tasks (only
// `only_host`'s with one launcher per machine), the evaluator, and the
// workers that join an elastic job, each with the argv it runs.
// Internal to distflow-launch.
//
// Thread-compatible: plain data and a pure function.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher.h"
#include "launcher_child.h"

namespace distflow {

// One task and its process, as the launcher follows it.
struct LaunchedTask {
  std::string job;
  int index = 0;
  std::string address;
  std::vector<std::string> argv;
  pid_t pid = -1;
  Stream out{-1, STDOUT_FILENO, ""}, err{-1, STDERR_FILENO, ""};
  int restarts = 0;
  bool running = false;
  bool finished_ok = false;
  std::string how;         // how it last ended
  std::string status_url;  // with --status_base_port
  bool joins = false;      // joins the running job (elastic): a new port and --join at every start
  // Variables of its environment for this start (a joiner of an elastic
  // all-reduce job: DISTFLOW_JOIN and DISTFLOW_JOIN_AS instead of flags).
  std::vector<std::pair<std::string, std::string>> env;
  std::string host;     // host discovery: the host whose slot it holds
  bool remote = false;  // this start runs on another machine, through the remote shell
  std::string remote_host;
  int in_fd = -1;         // a remote task's stdin, held while it runs: closing it stops the task on its host
  bool removing = false;  // host discovery: stopped because its host went away
  std::string name() const { return joins ? absl::StrCat(job, ":+", index) : absl::StrCat(job, ":", index); }
  bool is_ps() const { return job == "ps"; }
  bool is_evaluator() const { return job == "evaluator"; }
  // Elastic all-reduce (--ps 0): the task that only hosts the coordinator.
  bool is_coordinator() const { return job == kCoordinatorJob; }
  bool is_worker() const { return !is_ps() && !is_evaluator() && !is_coordinator(); }
};

// Whether the job is elastic: workers join it through a coordinator.
bool Elastic(const ClusterSpec& cluster, const LaunchOptions& options);

// Elastic: the address of the coordinator where workers join (the
// coordinator task, else ps 0, else worker 0: CoordinatorTask's rule); ""
// when the job is not elastic or the spec has no such task.
std::string CoordinatorAddress(const ClusterSpec& cluster, const LaunchOptions& options);

// The tasks to start, in order: the spec's (ps first), the evaluator, then
// `options.join_workers` joining workers (elastic), which get their
// address and port at each start.
std::vector<LaunchedTask> PlanTasks(const ClusterSpec& cluster, const LaunchOptions& options);

}  // namespace distflow
