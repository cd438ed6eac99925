// distflow-server: one task of a cluster.
//
//   distflow-server --cluster_spec='ps|localhost:2222,worker|localhost:2223' --job_name=ps --task_index=0
//   DISTFLOW_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 1}}' distflow-server
//   srun distflow-server --cluster_spec=... --job_layout=ps:1,worker:3   # task from SLURM_PROCID
//
// Exits 0 on SIGTERM/SIGINT or when the chief asks the cluster to shut down,
// 2 on a bad command line or cluster spec, 1 if the server cannot start or
// a ps gave up on a job that died (--orphan_grace_secs); 128+N on a second
// signal N while stopping.
//
// It is written against the public API alone (include/distflow/), as a
// program of a user would be, and links libdistflow.so.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/auth.h"
#include "distflow/cluster_spec.h"
#include "distflow/logging.h"
#include "distflow/server.h"
#include "distflow/task_config.h"
#include "distflow/version.h"

ABSL_FLAG(std::string, cluster_spec, "", "cluster as 'job|host:port;host:port,job|...' or JSON");
ABSL_FLAG(std::string, job_name, "", "this task's job");
// Strings, so that a value that is not a number is our clear error (exit 2).
ABSL_FLAG(std::string, task_index, "", "this task's index in its job");
ABSL_FLAG(std::string, task_id, "", "alias of --task_index");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate (chain) of this task: with --tls_key, every connection is TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate: peers must present certificates it signed (mutual TLS), and servers too");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the cluster's secret token (else DISTFLOW_AUTH_TOKEN); every task and client needs the same");
ABSL_FLAG(int, bulk_port, 0,
          "port for bulk tensor transfer on this task's host: 0 = any free one, -1 = off "
          "(large tensors then travel inside gRPC messages)");
ABSL_FLAG(bool, shared_memory, true,
          "move large tensors to and from tasks on this host through shared memory (memfd segments over a "
          "Unix-domain socket, checked with the cluster token) instead of TCP; DISTFLOW_SHM=0 turns it off too");
ABSL_FLAG(int, status_port, -1,
          "serve /status (an HTML page) and /metrics (Prometheus) over HTTP on this port of the task's host: "
          "0 = any free one, -1 = off");
ABSL_FLAG(double, heartbeat_timeout_secs, 10,
          "a task silent this long is declared dead: every task learns it and steps waiting on it fail naming it "
          "(0: no failure detection)");
ABSL_FLAG(double, heartbeat_interval_secs, 1,
          "how often this task tells the coordinator (the 'coordinator' job's task, else ps 0, else the chief) it "
          "lives");
ABSL_FLAG(double, orphan_grace_secs, 60,
          "a ps task exits 1 this long after its chief died without coming back, or every worker died "
          "(-1: never)");
ABSL_FLAG(int64_t, max_step_bytes, 0,
          "the most memory one step's kernel outputs may hold at once on this task (0: an eighth of the machine's "
          "memory, -1: no limit); a step over it fails with RESOURCE_EXHAUSTED naming the node");
ABSL_FLAG(int, max_sessions, 1024, "sessions this task's master holds at once");
ABSL_FLAG(int, max_concurrent_steps, 1024, "graph partitions this task runs at once");
ABSL_FLAG(bool, version, false, "print the version and the kernels' instruction set, then exit");
ABSL_FLAG(std::string, cluster_config, "", "file holding {\"cluster\": {...}, \"task\": {\"type\": J, \"index\": I}}");
ABSL_FLAG(std::string, job_layout, "",
          "jobs in rank order, e.g. ps:1,worker:3: the task is the one of rank SLURM_PROCID, "
          "OMPI_COMM_WORLD_RANK or PMI_RANK (rank 0 is ps 0, ranks 1..3 workers 0..2)");

namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "distflow-server: %s\n", msg.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists the flags of this file (absl matches files to the binary's
  // name, which has a dash where the file has an underscore).
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) { return absl::StrContains(file, "distflow_server"); };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage("Runs one task of a distflow cluster");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_version)) {
    std::printf("distflow-server %s\n%s\n", distflow::Version(), distflow::KernelIsaSummary().c_str());
    return 0;
  }

  // Every source of configuration (flags, --cluster_config, DISTFLOW_CONFIG,
  // a rank placed by --job_layout) must agree; see cluster/task_config.cc.
  distflow::TaskConfigFlags flags;
  flags.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);
  flags.job_name = absl::GetFlag(FLAGS_job_name);
  flags.task_index = absl::GetFlag(FLAGS_task_index);
  flags.task_id = absl::GetFlag(FLAGS_task_id);
  flags.cluster_config = absl::GetFlag(FLAGS_cluster_config);
  flags.job_layout = absl::GetFlag(FLAGS_job_layout);
  absl::StatusOr<distflow::TaskConfig> config = distflow::ResolveTaskConfig(flags, distflow::ProcessEnvironment());
  if (!config.ok()) return Fail(2, std::string(config.status().message()));
  const distflow::ClusterSpec& cluster = config->cluster;
  const std::string job = config->job;
  const int index = config->task_index;

  distflow::SetLogPrefix(distflow::TaskName(job, index));
  if (!config->placed_by.empty()) DF_LOG(INFO) << "This task was placed by " << config->placed_by;
  DF_LOG(INFO) << "distflow " << distflow::Version() << "; " << distflow::KernelIsaSummary();
  // Block the signals in every thread; one thread waits for them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  distflow::ServerOptions options;
  if (absl::Status st = distflow::SetUpClusterToken(absl::GetFlag(FLAGS_auth_token_file)); !st.ok()) {
    return Fail(2, std::string(st.message()));
  }
  if (absl::Status st = distflow::SetUpTls(
          {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)});
      !st.ok()) {
    return Fail(2, std::string(st.message()));
  }
  if (absl::Status st = distflow::CheckTlsCanServe(); !st.ok()) return Fail(2, std::string(st.message()));
  options.bulk_port = absl::GetFlag(FLAGS_bulk_port);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  if (options.bulk_port < -1 || options.bulk_port > 65535) {
    return Fail(2, absl::StrCat("bad --bulk_port=", options.bulk_port, ": use a port, 0 for any, or -1 for none"));
  }
  options.status_port = absl::GetFlag(FLAGS_status_port);
  if (options.status_port < -1 || options.status_port > 65535) {
    return Fail(2, absl::StrCat("bad --status_port=", options.status_port, ": use a port, 0 for any, or -1 for none"));
  }
  const double timeout = absl::GetFlag(FLAGS_heartbeat_timeout_secs);
  const double interval = absl::GetFlag(FLAGS_heartbeat_interval_secs);
  const double grace = absl::GetFlag(FLAGS_orphan_grace_secs);
  if (!(timeout >= 0 && timeout <= 86400)) {
    return Fail(2, absl::StrCat("bad --heartbeat_timeout_secs=", timeout, ": use 0 (off) to 86400"));
  }
  if (!(interval > 0 && interval <= 3600) || (timeout > 0 && interval >= timeout)) {
    return Fail(2, absl::StrCat("bad --heartbeat_interval_secs=", interval,
                                ": use a positive number below --heartbeat_timeout_secs (", timeout, ")"));
  }
  if (!(grace == -1 || (grace >= 0 && grace <= 86400))) {
    return Fail(2, absl::StrCat("bad --orphan_grace_secs=", grace, ": use -1 (never) or 0 to 86400"));
  }
  options.worker.max_step_bytes = absl::GetFlag(FLAGS_max_step_bytes);
  options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.worker.max_concurrent_steps = absl::GetFlag(FLAGS_max_concurrent_steps);
  if (options.worker.max_step_bytes < -1) {
    return Fail(2, absl::StrCat("bad --max_step_bytes=", options.worker.max_step_bytes,
                                ": use a number of bytes, 0 for an eighth of the memory, or -1 for no limit"));
  }
  if (options.max_sessions < 1) {
    return Fail(2, absl::StrCat("bad --max_sessions=", options.max_sessions, ": use 1 or more"));
  }
  if (options.worker.max_concurrent_steps < 1) {
    return Fail(2, absl::StrCat("bad --max_concurrent_steps=", options.worker.max_concurrent_steps, ": use 1 or more"));
  }
  options.heartbeat_timeout_ms = static_cast<int>(timeout * 1000);
  options.heartbeat_interval_ms = static_cast<int>(interval * 1000);
  options.orphan_grace_ms = grace < 0 ? -1 : static_cast<int>(grace * 1000);
  absl::StatusOr<std::unique_ptr<distflow::Server>> server = distflow::Server::Create(cluster, job, index, options);
  if (!server.ok()) return Fail(2, std::string(server.status().message()));
  absl::Status started = (*server)->Start();
  if (!started.ok()) return Fail(1, std::string(started.message()));

  distflow::Server* raw = server->get();
  // The first SIGTERM/SIGINT stops the server; a second one, or a stop that
  // takes longer than kStopWatchdog, ends the process at once.
  std::thread([raw, sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    DF_LOG(INFO) << "Received signal " << sig << "; shutting down (a second signal exits at once)";
    std::thread([raw] { raw->Stop(); }).detach();
    constexpr int kStopWatchdog = 20;
    timespec wait{kStopWatchdog, 0};
    siginfo_t info;
    int again = sigtimedwait(&sigs, &info, &wait);
    if (again > 0) {
      std::fprintf(stderr, "distflow-server: second signal (%d) while stopping: exiting now\n", again);
    } else {
      std::fprintf(stderr, "distflow-server: still stopping %d s after the signal: exiting now\n", kStopWatchdog);
    }
    std::fflush(stderr);
    std::_Exit(again > 0 ? 128 + again : 1);
  }).detach();
  raw->Join();
  const absl::Status why = raw->exit_status();
  if (!why.ok()) {
    std::fprintf(stderr, "distflow-server: %s\n", std::string(why.message()).c_str());
  } else {
    DF_LOG(INFO) << "Server stopped";
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(why.ok() ? 0 : 1);  // the signal thread may still be blocked in sigwait
}
