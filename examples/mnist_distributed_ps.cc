// The ps task of the book's distributed example (see mnist_distributed.cc):
// it serves the variables until the chief shuts the cluster down, and on
// SIGTERM asks the job to stop instead of vanishing under the workers.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "mnist_distributed_common.h"
#include "mnist_distributed_flags.h"
#include "mnist_distributed_stop.h"

namespace df = distflow;

namespace mnist_distributed {
namespace {

// Sets the job's stop flag (the variable every worker reads after its step,
// on the first ps task) through this task's own server. False if no worker
// has initialised it yet: the job has not started training.
absl::StatusOr<bool> AskTheJobToStop(const df::ClusterSpec& cluster, const std::string& target) {
  const std::string flag_device = StopFlagDevice(cluster);
  df::Scope root = df::Scope::NewRootScope();
  df::Scope s = root.WithDevice(flag_device);
  df::ops::VariableOptions o;
  o.trainable = false;
  df::Output flag = df::ops::Variable(s.WithOpName(kStopFlagName), df::PartialShape::Scalar(), df::DT_INT64, o);
  df::Output started = df::ops::IsVariableInitialized(s, flag);
  df::Output set = df::ops::Assign(s, flag, df::ops::Const(s, int64_t{1}));
  df::SessionOptions so;
  so.device_filters = {flag_device};
  so.wait_for_cluster_ms = 5000;
  so.operation_timeout_ms = 5000;
  df::Session session(target, so);
  absl::StatusOr<std::vector<df::Tensor>> r = session.Run({started});
  const bool training = r.ok() && (*r)[0].scalar<bool>();
  if (training) r = session.Run({set});
  (void)session.Close();
  if (!r.ok()) return r.status();
  return training;
}

}  // namespace

std::string StopFlagDevice(const df::ClusterSpec& cluster) {
  if (!cluster.HasJob("ps") || cluster.task_indices("ps").empty()) return "/job:worker/task:0";
  return absl::StrCat("/job:ps/task:", cluster.task_indices("ps").front());
}

int RunPs(const df::ClusterSpec& cluster, int task, const std::string& address) {
  absl::StatusOr<std::unique_ptr<df::Server>> created = df::Server::Create(cluster, "ps", task, BaseServerOptions());
  if (!created.ok()) return Die("creating the ps server", created.status());
  df::Server& server = **created;
  if (absl::Status st = server.Start(); !st.ok()) return Die("starting the ps server", st);
  std::printf("ps %d serving on %s\n", task, address.c_str());
  std::fflush(stdout);
  StopCleanlyOnSigterm(absl::GetFlag(FLAGS_stop_grace_secs));
  std::atomic<bool> shut_down{false};
  std::thread joiner([&] {
    server.Join();
    shut_down = true;
  });
  // Until the chief ends the cluster; after a SIGTERM, at most
  // --stop_grace_secs (the alarm of mnist_distributed_stop.cc).
  bool asked = false, chief_gone = false;
  while (!shut_down) {
    if (SigtermReceived() && !asked) {
      asked = true;
      absl::StatusOr<bool> stopping = AskTheJobToStop(cluster, server.target());
      if (stopping.ok() && *stopping) {
        std::printf("ps %d: SIGTERM: asked the job to stop; serving until the chief ends the cluster\n", task);
      } else {
        if (stopping.ok()) {
          std::printf("ps %d: SIGTERM before the job started training; stopping\n", task);
        } else {
          std::fprintf(stderr, "ps %d: SIGTERM: could not ask the job to stop (%s); stopping this server\n", task,
                       stopping.status().ToString().c_str());
        }
        server.Stop();
      }
      std::fflush(stdout);
    } else if (asked && !chief_gone) {
      // Nobody will end the cluster if the chief is dead: stop now rather than at the grace's end.
      for (const std::string& dead : server.DeadTasks()) {
        if (dead == "/job:worker/replica:0/task:0") chief_gone = true;
      }
      if (chief_gone) {
        std::printf("ps %d: SIGTERM: the chief is dead; stopping\n", task);
        std::fflush(stdout);
        server.Stop();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  joiner.join();
  if (absl::Status why = server.exit_status(); !why.ok()) return Die(absl::StrCat("ps ", task), why);
  std::printf("ps %d: the cluster was shut down%s\n", task, asked ? " (this task was told to stop: SIGTERM)" : "");
  return 0;
}

}  // namespace mnist_distributed
