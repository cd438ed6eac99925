// The launcher's engine (tools/distflow_launch.cc parses the flags): runs
// every task of a cluster as a child process of this one and follows them
// to the end.
//
// Each task runs `program` (a ps task: `ps_program`) with --job_name,
// --task_index and --cluster_spec appended and DISTFLOW_CONFIG set, in its
// own process group with a parent-death signal, so none outlives the
// launcher. Every line a task writes is copied to the launcher's stdout or
// stderr with the task's name in front ("[worker:2] ..."), whole lines only;
// "cluster up" is said once every task answers gRPC's health check, but
// for those that ended meanwhile and will not serve there again (a joiner
// that failed at once on a broken host), which it names.
//
// The end: every worker exited 0 and the ps tasks exited (a ps still
// running `ps_exit_secs` later is stopped): 0. A task that fails is
// restarted up to `restart_on_failure` times; after that the others are
// stopped (SIGTERM, then SIGKILL after `grace_secs`) and the result is 1,
// naming the task and how it ended. A signal (a byte on `signal_fd`, with
// `signals` counting them) stops every task the same way; a second kills
// them at once.
//
// With `evaluator`, one more task runs `program` outside the cluster spec,
// as TensorFlow's TF_CONFIG has it: task type "evaluator", index 0, the
// cluster's spec in DISTFLOW_CONFIG and --job_name=evaluator --task_index=0
// --cluster_spec appended; it serves nothing (no health check, no status
// port) and the job waits for it as for a worker. tf.estimator's
// train_and_evaluate evaluates the chief's checkpoints there.
//
// Elastic (`join_workers` > 0): besides the cluster's tasks, `join_workers`
// more workers start with DISTFLOW_JOIN=<the coordinator's address> and
// DISTFLOW_JOIN_AS=<a free port on `join_host`> in their environment (not
// flags: the program's own argument parser cannot take them for one of its
// flags) instead of a task of the spec, and join the
// running job through its coordinator (ps 0; without a ps job, the task of
// the kCoordinatorJob job, which runs `ps_program` and is stopped once the
// workers are done). A worker that fails, other than the chief (worker 0
// where there is a ps job; none with a coordinator task), is replaced by a
// new joining worker (up to `restart_on_failure` replacements in all); the
// job fails (1, naming the counts) once fewer than `min_workers` workers
// are left running or done.
//
// Host discovery (`host_discovery_script` set, elastic): workers go to the
// slots of the hosts the script lists (host_discovery.h; `hosts` is its
// first answer, where the spec's workers were placed). The launcher runs it
// again every `discovery_interval_secs`: it starts joining workers on free
// slots while there are fewer than `max_workers`, and stops (SIGTERM) the
// workers of a host that is no longer listed or lists fewer slots, never
// the chief and never below `min_workers`. A script that fails, hangs or
// prints a malformed line is named and the job keeps its workers. A worker
// that fails counts against its host; a host with
// `host_failures_to_blacklist` failures is blacklisted (no worker starts
// there again), and a free slot elsewhere takes a new worker instead of
// --restart_on_failure's replacements.
//
// Remote hosts (`remote_shell` set): a task whose host is not this machine
// (a --cluster_spec over machines, a discovered host, --host) starts
// through the remote shell (remote_shell.h): its output is copied and
// prefixed as a local task's, its exit status is the remote shell's (named
// with its host), and stopping it (or the launcher's death) closes its
// stdin, which stops it on its host after the grace period. A port for it
// is picked free on this machine: a guess for the other one (a taken port
// fails the task, which is then replaced or restarted like any failure).
//
// One launcher per machine (`only_host` set): only the spec's tasks whose
// host is `only_host` run here, and the launcher ends when they have; one
// that holds no worker waits for its ps tasks to exit (the chief ends the
// cluster) instead of stopping them `ps_exit_secs` after its (no) workers.
// Not thread-safe: one RunCluster per process.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "distflow/cluster_spec.h"
#include "host_discovery.h"

namespace distflow {

class Env;

// Elastic all-reduce (--ps 0 --min_workers/--max_workers): the job of the
// one task that only hosts the coordinator (a distflow-server outside the
// worker set, as Horovod's driver hosts its rendezvous), so that no
// worker's death ends the job. CoordinatorTask (src/coordination) takes
// task 0 of this job first.
inline constexpr char kCoordinatorJob[] = "coordinator";

struct LaunchOptions {
  std::vector<std::string> program;  // every task that is not a ps task
  std::string ps_program;            // the ps tasks
  int status_base_port = 0;          // > 0: task i serves its status page on this + i
  // False: the ps tasks' distflow-server gets --shared_memory=false (the
  // caller sets DISTFLOW_SHM=0 for every task).
  bool shared_memory = true;
  bool evaluator = false;  // one evaluator task besides the cluster's (see above)
  int restart_on_failure = 0;
  int grace_secs = 10;
  int ps_exit_secs = 30;
  int up_timeout_secs = 120;
  // More flags of the coordinator task when it runs distflow-server (its
  // heartbeat timeout, from DISTFLOW_HEARTBEAT_TIMEOUT_SECS).
  std::vector<std::string> coordinator_flags;
  std::string only_host;  // one launcher per machine: run only the tasks on this host
  int join_workers = 0;   // elastic: workers that join the running job
  int min_workers = 0;    // elastic: the job fails below this many workers
  std::string join_host = "127.0.0.1";
  // Host discovery (see above).
  std::string host_discovery_script;
  std::vector<DiscoveredHost> hosts;
  int max_workers = 0;
  int discovery_interval_secs = 3;
  int discovery_timeout_secs = 10;
  int host_failures_to_blacklist = 2;
  // A task whose host is not this machine (IsLocalHost) runs through this
  // command template ({host}: its host; remote_shell.h); "": every task
  // runs here. Not used with `only_host` (every task is then this host's).
  std::string remote_shell;
  // The clock of the launcher's own timekeeping (the grace period, the ps
  // tasks' exit wait, the discovery interval, the wait for "cluster up") and
  // its pauses; null: the real one (Env::Default()). It must outlive the run.
  // The host discovery script's timeout and the health checks' deadlines are
  // the kernel's and gRPC's, on the real clock.
  Env* env = nullptr;
};

// Runs `cluster` to its end; the launcher's exit status.
int RunCluster(const ClusterSpec& cluster, LaunchOptions options, int signal_fd, const std::atomic<int>* signals);

// Writes `s` with as few writes as it takes (one, for a line), so lines of
// different tasks never mix.
void WriteAll(int fd, const std::string& s);
// "[launch] LINE" on stdout (Say) or stderr (Complain).
void Say(const std::string& line);
void Complain(const std::string& line);

}  // namespace distflow
