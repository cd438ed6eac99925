// distflow-launch: one command for a whole cluster on this machine.
//
//   distflow-launch --ps 1 --workers 3 -- build/examples/mnist_distributed --train_steps=5000
//   distflow-launch --cluster_spec='ps|localhost:2222,worker|localhost:2223;localhost:2224' -- PROGRAM ARGS...
//
// Starts one process per task: PROGRAM for every task that is not a ps
// task, --ps_program (default: the distflow-server beside this binary) for
// the ps tasks, each with --job_name, --task_index and --cluster_spec
// appended and DISTFLOW_CONFIG set. Without --cluster_spec the tasks get
// --host and consecutive ports from --base_port, or free ports. With
// --this_host=ADDRESS (and --cluster_spec) only the spec's tasks on that
// host start: run one launcher on each machine of the spec; each ends when
// its own tasks have (a launcher holding only ps tasks waits for the chief
// to end them).
//
// Every line a task writes is copied to this process's stdout or stderr
// with the task's name in front ("[worker:2] ..."), whole lines only. Once
// every task answers gRPC's health check, "cluster up" is printed.
//
// The end: when every worker has exited 0 and the ps tasks have exited (the
// chief shuts the cluster down; a ps still running --ps_exit_secs later is
// stopped), exit 0. A task that fails is restarted up to
// --restart_on_failure times; after that the others are stopped (SIGTERM,
// then SIGKILL after --grace_secs) and the exit status is 1, naming the task
// and how it ended. SIGINT or SIGTERM stops every task the same way (a
// second one kills them at once). Each task runs in its own process group
// with a parent-death signal, so none outlives this process, even when it
// is killed with SIGKILL.
//
// --shared_memory=false turns same-host shared memory off in every task
// (DISTFLOW_SHM=0 in their environment; distflow-server as the ps program
// also gets --shared_memory=false), so the tasks' large tensors take TCP.
//
// --evaluator adds TensorFlow's evaluator task (tf.estimator's
// train_and_evaluate): PROGRAM once more, outside the cluster spec as in
// TF_CONFIG, with --job_name=evaluator --task_index=0 --cluster_spec
// appended and DISTFLOW_CONFIG's task {"type": "evaluator", "index": 0}. It
// serves nothing; the job waits for it to exit 0 as for a worker.
//
//   distflow-launch --ps 1 --workers 2 --evaluator -- python3 examples/python/estimator_linear.py --model_dir=/tmp/m
//
// Elastic: --min_workers M --max_workers N (instead of --workers) starts
// the ps tasks and M workers as the cluster spec, and N-M more workers that
// join the running job through its coordinator (ps 0; the program gets
// DISTFLOW_JOIN=ADDRESS and DISTFLOW_JOIN_AS=HOST:PORT in its environment
// instead of a task of the spec, never flags its own argument parser could
// take: the book's mnist_distributed and distflow.elastic.launcher_join()
// read them). A worker that fails, other than the
// chief, is replaced by a new joining worker, up to --restart_on_failure
// times in all; the job fails once fewer than M workers are left. With
// --ps 0 (all-reduce training) one more task, job "coordinator" (the ps
// program, on --host; outside the workers, as Horovod's driver hosts its
// rendezvous), hosts the coordinator, so any worker may die, worker 0 too,
// and be replaced; it is stopped once the workers are done, and takes its
// heartbeat timeout from DISTFLOW_HEARTBEAT_TIMEOUT_SECS. Every task gets
// DISTFLOW_ELASTIC=1: a Horovod program's hvd.elastic then rebuilds its
// group as workers join and leave (docs/COLLECTIVES.md, Elastic groups).
//
// --host_discovery_script SCRIPT (with --min_workers/--max_workers; Horovod
// elastic's format: it prints `host[:slots]` lines) places the workers on
// the slots of the hosts it lists (the ps tasks stay on --host). The
// launcher waits up to --min_workers_wait_secs for the script to list
// --min_workers slots (else exits 1 naming both counts), then runs it every
// --discovery_interval_secs: new slots take joining workers up to
// --max_workers, the workers of a host that is no longer listed are
// stopped (never the chief, never below the minimum), and a host whose
// workers failed --host_failures_to_blacklist times is blacklisted (a host
// whose remote shell fails is named and blacklisted the same way).
//
// Other machines: a task whose host is not this machine (a discovered
// host, a --cluster_spec over several machines without --this_host, or
// --host) starts through --remote_shell, a command template in which
// {host} is the task's host, by default `ssh -o BatchMode=yes {host}` (as
// horovodrun starts its ranks): the task's command line (cd to this
// directory, its DISTFLOW_CONFIG and join variables, this launcher's
// DISTFLOW_*, HOROVOD_* and PYTHONPATH, the program) is its last argument,
// so a runner that takes a program instead of a command line needs a shell
// at its end (`ip netns exec {host} sh -c`). Its output is prefixed and its
// failures named as a local task's. A watchdog beside the task on its host
// reads the remote shell's stdin, which this launcher holds: stopping the
// task, the launcher's death (SIGKILL too) or a broken connection ends that
// input, and the watchdog stops the task (SIGTERM, SIGKILL after
// --grace_secs). What a remote shell cannot promise: a host that is cut
// off keeps its task running until it notices (the cluster's heartbeats
// then declare it dead), and DISTFLOW_AUTH_TOKEN is not passed on (it would
// be on a command line; give remote hosts the token in a file,
// --auth_token_file). Ports of remote tasks are picked free on this
// machine, a guess for the other one. --remote_shell= (empty) runs every
// task here as before.
//
// --emit kubernetes|slurm starts nothing: it prints (or writes to
// --emit_file) manifests for the same cluster shape, --ps N --workers M on
// --base_port (default 2222) with --image and --name; see launch_emit.h.
//
//   distflow-launch --emit kubernetes --ps 1 --workers 3 --image registry/distflow:1 -- mnist_distributed
//   distflow-launch --emit slurm --ps 1 --workers 3 -- ./mnist_distributed --train_steps=5000 > job.sbatch
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/ports.h"
#include "distflow/cluster_spec.h"
#include "host_discovery.h"
#include "launch_emit.h"
#include "launcher.h"
#include "remote_shell.h"

ABSL_FLAG(int, ps, 1, "ps tasks (without --cluster_spec)");
ABSL_FLAG(int, workers, 1, "worker tasks (without --cluster_spec); worker 0 is the chief");
ABSL_FLAG(bool, evaluator, false,
          "also run PROGRAM as TensorFlow's evaluator task (tf.estimator.train_and_evaluate): outside the cluster "
          "spec, with --job_name=evaluator --task_index=0 and DISTFLOW_CONFIG's task type \"evaluator\"; the job "
          "waits for it as for a worker");
ABSL_FLAG(int, min_workers, 0,
          "elastic: the job needs at least this many workers; they are the cluster spec's (instead of --workers)");
ABSL_FLAG(int, max_workers, 0,
          "elastic: start this many workers in all; those beyond --min_workers join the running job");
ABSL_FLAG(std::string, host_discovery_script, "",
          "elastic: a command printing the hosts that may run workers now, one host[:slots] a line; run every "
          "--discovery_interval_secs");
ABSL_FLAG(int, discovery_interval_secs, 3, "with --host_discovery_script: how often it runs");
ABSL_FLAG(int, discovery_timeout_secs, 10, "with --host_discovery_script: how long one run may take");
ABSL_FLAG(int, min_workers_wait_secs, 60,
          "with --host_discovery_script: how long to wait for it to list --min_workers slots before giving up");
ABSL_FLAG(int, host_failures_to_blacklist, 2,
          "with --host_discovery_script: failed workers after which a host is not used again");
ABSL_FLAG(std::string, remote_shell, distflow::kDefaultRemoteShell,
          "how a task on a host that is not this machine starts: a command template, {host} its host, given the "
          "task's shell command line as its last argument (\"\": run every task here)");
ABSL_FLAG(int, base_port, 0, "first port of consecutive ones for the tasks, ps first (0: free ports)");
ABSL_FLAG(std::string, host, "127.0.0.1", "host of every task (without --cluster_spec)");
ABSL_FLAG(std::string, cluster_spec, "", "the cluster, as for distflow-server, instead of --ps/--workers");
ABSL_FLAG(std::string, this_host, "",
          "with --cluster_spec: start only the tasks whose host is this one (one launcher on each machine of the "
          "spec); the launcher ends when its own tasks have");
ABSL_FLAG(std::string, ps_program, "", "program of the ps tasks (default: distflow-server beside this binary)");
ABSL_FLAG(int, status_base_port, 0,
          "give every task a status page (/status, /metrics) on consecutive ports from this one, ps first "
          "(--status_port=P appended; 0: none)");
ABSL_FLAG(bool, shared_memory, true,
          "tasks on this machine move large tensors through shared memory (docs/TRANSPORT.md); false turns it off "
          "in every task: DISTFLOW_SHM=0 in each task's environment, and --shared_memory=false to distflow-server");
ABSL_FLAG(int, restart_on_failure, 0, "restart a task that fails up to this many times");
ABSL_FLAG(int, grace_secs, 10, "after SIGTERM, how long a task has before SIGKILL");
ABSL_FLAG(int, ps_exit_secs, 30, "after the workers finished, how long the ps tasks have to exit by themselves");
ABSL_FLAG(int, up_timeout_secs, 120, "how long to wait for every task's health check before warning");
ABSL_FLAG(std::string, emit, "",
          "start nothing; print manifests for this cluster manager instead: kubernetes or slurm");
ABSL_FLAG(std::string, emit_file, "", "with --emit: write the manifests to this file instead of stdout");
ABSL_FLAG(std::string, image, "distflow:latest", "with --emit kubernetes: the container image of every task");
ABSL_FLAG(std::string, name, "distflow",
          "with --emit: prefix of the Kubernetes objects (PREFIX-ps, PREFIX-worker) or the SLURM job name");

namespace {

using distflow::ClusterSpec;
using distflow::Say;
using distflow::WriteAll;

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

void OnSignal(int sig) {
  g_signals.fetch_add(1);
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// True if `program` names an executable file (directly, or on PATH).
bool Executable(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    if (access(absl::StrCat(dir.empty() ? "." : dir, "/", program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// OK if `port` on `host` can be bound now.
absl::Status PortFree(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::OkStatus();  // cannot tell; the task will say
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &a.sin_addr) != 1) {
    close(fd);
    return absl::OkStatus();
  }
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  const int e = errno;
  close(fd);
  if (ok) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("port ", port, " on ", host, " is taken (", strerror(e), ")"));
}

// A heartbeat timeout from DISTFLOW_HEARTBEAT_TIMEOUT_SECS (what a Horovod
// program's ranks read) as distflow-server's flags, so the coordinator task
// declares a rank dead when the ranks expect it to; none if unset or bad
// (the ranks' hvd.init() names a bad value).
std::vector<std::string> HeartbeatFlagsFromEnv() {
  const char* raw = std::getenv("DISTFLOW_HEARTBEAT_TIMEOUT_SECS");
  double secs = 0;
  if (raw == nullptr || !absl::SimpleAtod(raw, &secs) || !(secs > 0) || secs > 86400) return {};
  const double interval = std::max(0.1, std::min(1.0, secs / 4));
  return {absl::StrCat("--heartbeat_timeout_secs=", secs), absl::StrCat("--heartbeat_interval_secs=", interval)};
}

int Usage(const std::string& what) {
  std::fprintf(stderr, "distflow-launch: %s\n", what.c_str());
  return 2;
}

// --emit: the manifests, on stdout or in --emit_file.
int Emit(const std::vector<std::string>& program) {
  const std::string kind = absl::GetFlag(FLAGS_emit);
  if (kind != "kubernetes" && kind != "slurm") {
    return Usage(
        absl::StrCat("--emit=", kind, " is not a cluster manager distflow-launch knows; use kubernetes or slurm"));
  }
  if (!absl::GetFlag(FLAGS_cluster_spec).empty()) {
    return Usage(
        "--emit builds the cluster from --ps and --workers (the addresses come from the cluster manager); "
        "drop --cluster_spec");
  }
  distflow::EmitOptions o;
  o.ps = absl::GetFlag(FLAGS_ps);
  o.workers = absl::GetFlag(FLAGS_workers);
  if (absl::GetFlag(FLAGS_base_port) != 0) o.port = absl::GetFlag(FLAGS_base_port);
  o.program = program;
  if (!absl::GetFlag(FLAGS_ps_program).empty()) o.ps_program = absl::GetFlag(FLAGS_ps_program);
  o.image = absl::GetFlag(FLAGS_image);
  o.name = absl::GetFlag(FLAGS_name);
  absl::StatusOr<std::string> text = kind == "kubernetes" ? distflow::KubernetesManifests(o) : distflow::SlurmScript(o);
  if (!text.ok()) return Usage(std::string(text.status().message()));
  const std::string path = absl::GetFlag(FLAGS_emit_file);
  if (path.empty()) {
    WriteAll(STDOUT_FILENO, *text);
    return 0;
  }
  if (absl::Status st = distflow::Env::Default()->WriteFileAtomically(path, *text); !st.ok()) {
    return Usage(absl::StrCat("cannot write --emit_file=", path, ": ", st.message()));
  }
  if (kind == "slurm") chmod(path.c_str(), 0755);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists the flags of this file (absl matches files to the binary's
  // name, which has a dash where the file has an underscore).
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) { return absl::StrContains(file, "distflow_launch"); };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "starts a cluster on this machine: distflow-launch --ps N --workers M [--base_port P] [--host H] -- PROGRAM "
      "[ARGS...] (--evaluator: one more task evaluating, as TF_CONFIG's evaluator), or distflow-launch "
      "--cluster_spec=SPEC -- PROGRAM [ARGS...], or distflow-launch --emit "
      "kubernetes|slurm --ps N --workers M -- PROGRAM [ARGS...] to print manifests instead");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  // What follows "--" is the program; absl leaves it as positional arguments.
  std::vector<std::string> program(rest.begin() + 1, rest.end());
  if (program.empty()) return Usage("no program: put it after --, e.g. distflow-launch --workers 2 -- ./trainer");
  if (!absl::GetFlag(FLAGS_emit).empty()) {
    if (absl::GetFlag(FLAGS_evaluator)) {
      return Usage("--evaluator and --emit: the manifests have no evaluator task yet; drop --evaluator");
    }
    return Emit(program);
  }
  if (!absl::GetFlag(FLAGS_emit_file).empty()) return Usage("--emit_file needs --emit kubernetes or --emit slurm");

  // Elastic membership: checked before anything starts.
  const int min_workers = absl::GetFlag(FLAGS_min_workers), max_workers = absl::GetFlag(FLAGS_max_workers);
  const bool elastic = min_workers != 0 || max_workers != 0;
  if (elastic) {
    if (min_workers < 1 || max_workers < 1) {
      return Usage(
          absl::StrCat("--min_workers=", min_workers, " --max_workers=", max_workers, ": give both, each at least 1"));
    }
    if (min_workers > max_workers) {
      return Usage(absl::StrCat("--min_workers=", min_workers, " is above --max_workers=", max_workers,
                                ": the job cannot need more workers than it may have"));
    }
    if (absl::GetFlag(FLAGS_workers) != 1) {
      return Usage(
          absl::StrCat("--workers=", absl::GetFlag(FLAGS_workers),
                       " and --min_workers/--max_workers: pass one (the minimum is the cluster spec's workers)"));
    }
    if (!absl::GetFlag(FLAGS_cluster_spec).empty()) {
      return Usage("--min_workers/--max_workers build the cluster from --ps and --host; drop --cluster_spec");
    }
    absl::SetFlag(&FLAGS_workers, min_workers);
    // Read by a Horovod program's hvd.init() (its group is elastic).
    setenv("DISTFLOW_ELASTIC", "1", 1);
  }
  const std::string discovery_script = absl::GetFlag(FLAGS_host_discovery_script);
  std::vector<distflow::DiscoveredHost> hosts;
  if (!discovery_script.empty()) {
    if (!elastic) return Usage("--host_discovery_script needs --min_workers and --max_workers");
    for (const auto& [flag, v] :
         {std::pair<const char*, int>{"discovery_interval_secs", absl::GetFlag(FLAGS_discovery_interval_secs)},
          {"discovery_timeout_secs", absl::GetFlag(FLAGS_discovery_timeout_secs)},
          {"host_failures_to_blacklist", absl::GetFlag(FLAGS_host_failures_to_blacklist)}}) {
      if (v < 1) return Usage(absl::StrCat("--", flag, "=", v, ": must be at least 1"));
    }
    if (absl::GetFlag(FLAGS_base_port) != 0) {
      return Usage("--base_port and --host_discovery_script: the workers take free ports on their hosts");
    }
    // The minimum, within a bounded wait.
    const int wait_secs = absl::GetFlag(FLAGS_min_workers_wait_secs);
    const absl::Time deadline = absl::Now() + absl::Seconds(wait_secs);
    std::string last_error;
    int offered = 0;
    for (;;) {
      absl::StatusOr<std::vector<distflow::DiscoveredHost>> found =
          distflow::DiscoverHosts(discovery_script, absl::Seconds(absl::GetFlag(FLAGS_discovery_timeout_secs)));
      if (found.ok()) {
        offered = distflow::TotalSlots(*found);
        if (offered >= min_workers) {
          hosts = std::move(*found);
          break;
        }
      } else if (std::string(found.status().message()) != last_error) {
        last_error = std::string(found.status().message());
        distflow::Complain(absl::StrCat(last_error, "; trying again"));
      }
      if (absl::Now() >= deadline) {
        distflow::Complain(absl::StrCat("the host discovery script listed ", offered, " slot(s) in ", wait_secs,
                                        " s; --min_workers=", min_workers, " needs ", min_workers,
                                        ". Add hosts or slots, lower --min_workers, or wait longer "
                                        "(--min_workers_wait_secs)"));
        return 1;
      }
      absl::SleepFor(absl::Seconds(std::min(1, absl::GetFlag(FLAGS_discovery_interval_secs))));
    }
  }

  const std::string remote_shell = absl::GetFlag(FLAGS_remote_shell);
  if (!remote_shell.empty() && !absl::StrContains(remote_shell, "{host}")) {
    return Usage(absl::StrCat("--remote_shell='", remote_shell,
                              "' has no {host}: say where the host goes, e.g. --remote_shell='ssh {host}'"));
  }
  absl::StatusOr<ClusterSpec> cluster;
  const std::string spec = absl::GetFlag(FLAGS_cluster_spec);
  if (!spec.empty()) {
    if (absl::GetFlag(FLAGS_base_port) != 0) return Usage("--base_port and --cluster_spec: pass one of them");
    cluster = ClusterSpec::Parse(spec);
    if (!cluster.ok()) return Usage(absl::StrCat("bad --cluster_spec: ", cluster.status().message()));
    if (cluster->HasJob("evaluator")) {
      return Usage(
          "--cluster_spec has an 'evaluator' job: TensorFlow's evaluator is not part of the cluster spec; drop "
          "that job and pass --evaluator");
    }
  } else {
    const int ps = absl::GetFlag(FLAGS_ps), workers = absl::GetFlag(FLAGS_workers);
    const int base = absl::GetFlag(FLAGS_base_port);
    const std::string host = absl::GetFlag(FLAGS_host);
    if (ps < 0 || workers < 1)
      return Usage(absl::StrCat("--ps=", ps, " --workers=", workers, ": need ps >= 0 and workers >= 1"));
    // Elastic all-reduce: one more task, outside the workers, hosts the
    // coordinator (a worker's death must not take the membership with it).
    const int coordinators = elastic && ps == 0 ? 1 : 0;
    if (base < 0 || base + ps + workers + coordinators - 1 > 65535) {
      return Usage(absl::StrCat("--base_port=", base, " leaves no room for ", ps + workers + coordinators, " ports"));
    }
    ClusterSpec::JobMap jobs;
    int next = base;
    // With host discovery, worker i takes the i-th slot of the listed hosts.
    std::vector<std::string> slot_hosts;
    for (const distflow::DiscoveredHost& h : hosts) slot_hosts.insert(slot_hosts.end(), h.slots, h.host);
    for (const auto& [job, n] :
         {std::pair<std::string, int>{"ps", ps}, {"worker", workers}, {distflow::kCoordinatorJob, coordinators}}) {
      for (int i = 0; i < n; ++i) {
        int port = next;
        const std::string& host_i = job == "worker" && i < static_cast<int>(slot_hosts.size()) ? slot_hosts[i] : host;
        if (base == 0) {
          // Another machine's ports cannot be seen from here: one free here is a guess.
          const bool here = remote_shell.empty() || distflow::IsLocalHost(host_i);
          absl::StatusOr<int> free = distflow::PickUnusedTcpPort(here ? host_i : "127.0.0.1");
          // A host name: the port is checked on the wildcard address, which covers it.
          if (absl::IsInvalidArgument(free.status())) free = distflow::PickUnusedTcpPort("127.0.0.1");
          if (!free.ok()) return Usage(std::string(free.status().message()));
          port = *free;
        } else {
          ++next;
        }
        jobs[job][i] = absl::StrCat(host_i, ":", port);
      }
    }
    if (ps == 0) jobs.erase("ps");
    if (coordinators == 0) jobs.erase(distflow::kCoordinatorJob);
    cluster = ClusterSpec::FromJobs(std::move(jobs));
    if (!cluster.ok()) return Usage(absl::StrCat("bad --host: ", cluster.status().message()));
  }
  if (absl::GetFlag(FLAGS_evaluator) && !cluster->HasJob("worker") && !cluster->HasJob("chief")) {
    return Usage("--evaluator: the cluster has no worker or chief job to train the model it evaluates");
  }
  const int status_base = absl::GetFlag(FLAGS_status_base_port);
  const int num_tasks = static_cast<int>(cluster->AllTaskNames().size());
  if (status_base < 0 || (status_base > 0 && status_base + num_tasks - 1 > 65535)) {
    return Usage(absl::StrCat("--status_base_port=", status_base, " leaves no room for ", num_tasks,
                              " ports (0 turns status pages off)"));
  }
  std::string ps_program = absl::GetFlag(FLAGS_ps_program);
  if (ps_program.empty()) {
    ps_program = SelfDir() + "/distflow-server";
    if (access(ps_program.c_str(), X_OK) != 0) ps_program = "distflow-server";
  }
  if (!Executable(program[0])) {
    return Usage(absl::StrCat("the program '", program[0], "' does not exist or is not executable"));
  }
  if ((cluster->HasJob("ps") || cluster->HasJob(distflow::kCoordinatorJob)) && !Executable(ps_program)) {
    return Usage(absl::StrCat("the ps program '", ps_program, "' (",
                              cluster->HasJob("ps") ? "the ps tasks" : "the coordinator task",
                              ") does not exist or is not executable (--ps_program)"));
  }
  const std::string this_host = absl::GetFlag(FLAGS_this_host);
  if (!this_host.empty()) {
    if (spec.empty()) return Usage("--this_host picks this machine's tasks of --cluster_spec; give --cluster_spec");
    std::vector<std::string> spec_hosts;
    bool any = false;
    for (const auto& [job, tasks] : cluster->job_map()) {
      for (const auto& [index, address] : tasks) {
        absl::StatusOr<std::pair<std::string, int>> hp = distflow::SplitHostPort(address);
        if (!hp.ok()) continue;
        any = any || hp->first == this_host;
        if (std::find(spec_hosts.begin(), spec_hosts.end(), hp->first) == spec_hosts.end())
          spec_hosts.push_back(hp->first);
      }
    }
    if (!any) {
      return Usage(absl::StrCat("no task of --cluster_spec is on --this_host=", this_host,
                                "; its hosts are: ", absl::StrJoin(spec_hosts, ", ")));
    }
  }
  // Ports someone else holds: say so now rather than through a failing task.
  for (const auto& [job, tasks] : cluster->job_map()) {
    for (const auto& [index, address] : tasks) {
      absl::StatusOr<std::pair<std::string, int>> hp = distflow::SplitHostPort(address);
      if (!hp.ok()) continue;
      if (!this_host.empty() && hp->first != this_host) continue;  // another machine's task
      if (this_host.empty() && !distflow::IsLocalHost(hp->first)) {
        if (remote_shell.empty()) {
          return Usage(absl::StrCat("task ", job, ":", index, " is on ", hp->first,
                                    ", which is not this machine, and --remote_shell is empty: give a remote shell "
                                    "(e.g. --remote_shell='ssh {host}') or run one launcher per machine "
                                    "(--this_host)"));
        }
        continue;  // started there through the remote shell; its port is that machine's
      }
      if (absl::Status free = PortFree(hp->first, hp->second); !free.ok()) {
        return Usage(absl::StrCat("task ", job, ":", index, ": ", free.message()));
      }
    }
  }

  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return Usage("cannot make a pipe");
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  distflow::LaunchOptions options;
  options.program = program;
  options.ps_program = ps_program;
  options.status_base_port = status_base;
  options.evaluator = absl::GetFlag(FLAGS_evaluator);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  // Every task's program reads it, whatever its language or flags.
  if (!options.shared_memory) setenv("DISTFLOW_SHM", "0", 1);
  options.restart_on_failure = absl::GetFlag(FLAGS_restart_on_failure);
  options.grace_secs = absl::GetFlag(FLAGS_grace_secs);
  options.ps_exit_secs = absl::GetFlag(FLAGS_ps_exit_secs);
  options.up_timeout_secs = absl::GetFlag(FLAGS_up_timeout_secs);
  options.coordinator_flags = HeartbeatFlagsFromEnv();
  options.only_host = this_host;
  options.remote_shell = remote_shell;
  if (elastic) {
    options.join_workers = max_workers - min_workers;
    options.min_workers = min_workers;
    options.join_host = absl::GetFlag(FLAGS_host);
    if (!discovery_script.empty()) {
      options.host_discovery_script = discovery_script;
      options.max_workers = max_workers;
      options.join_workers = std::max(0, std::min(max_workers, distflow::TotalSlots(hosts)) - min_workers);
      options.hosts = std::move(hosts);
      options.discovery_interval_secs = absl::GetFlag(FLAGS_discovery_interval_secs);
      options.discovery_timeout_secs = absl::GetFlag(FLAGS_discovery_timeout_secs);
      options.host_failures_to_blacklist = absl::GetFlag(FLAGS_host_failures_to_blacklist);
    }
  }
  Say(absl::StrCat("cluster ", cluster->ToFlagString().value_or(cluster->ToJson())));
  return distflow::RunCluster(*cluster, std::move(options), g_signal_pipe[0], &g_signals);
}
