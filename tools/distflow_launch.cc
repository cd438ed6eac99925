// distflow-launch: one command for a whole cluster on this machine.
//
//   distflow-launch --ps 1 --workers 3 -- build/examples/mnist_distributed --train_steps=5000
//   distflow-launch --cluster_spec='ps|localhost:2222,worker|localhost:2223;localhost:2224' -- PROGRAM ARGS...
//
// Starts one process per task: PROGRAM for every task that is not a ps
// task, --ps_program (default: the distflow-server beside this binary) for
// the ps tasks, each with --job_name, --task_index and --cluster_spec
// appended and DISTFLOW_CONFIG set. Without --cluster_spec the tasks get
// --host and consecutive ports from --base_port, or free ports.
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
// --emit kubernetes|slurm starts nothing: it prints (or writes to
// --emit_file) manifests for the same cluster shape, --ps N --workers M on
// --base_port (default 2222) with --image and --name; see launch_emit.h.
//
//   distflow-launch --emit kubernetes --ps 1 --workers 3 --image registry/distflow:1 -- mnist_distributed
//   distflow-launch --emit slurm --ps 1 --workers 3 -- ./mnist_distributed --train_steps=5000 > job.sbatch
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "base/ports.h"
#include "distflow/cluster_spec.h"
#include "distributed/auth.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "launch_emit.h"
#include "proto/health.grpc.pb.h"

ABSL_FLAG(int, ps, 1, "ps tasks (without --cluster_spec)");
ABSL_FLAG(int, workers, 1, "worker tasks (without --cluster_spec); worker 0 is the chief");
ABSL_FLAG(int, base_port, 0, "first port of consecutive ones for the tasks, ps first (0: free ports)");
ABSL_FLAG(std::string, host, "127.0.0.1", "host of every task (without --cluster_spec)");
ABSL_FLAG(std::string, cluster_spec, "", "the cluster, as for distflow-server, instead of --ps/--workers");
ABSL_FLAG(std::string, ps_program, "", "program of the ps tasks (default: distflow-server beside this binary)");
ABSL_FLAG(int, status_base_port, 0,
          "give every task a status page (/status, /metrics) on consecutive ports from this one, ps first "
          "(--status_port=P appended; 0: none)");
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

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

void OnSignal(int sig) {
  g_signals.fetch_add(1);
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_signal_pipe[1], &b, 1);
  (void)ignored;
}

// One write per line, so lines of different tasks never mix.
void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void Say(const std::string& line) { WriteAll(STDOUT_FILENO, absl::StrCat("[launch] ", line, "\n")); }
void Complain(const std::string& line) { WriteAll(STDERR_FILENO, absl::StrCat("[launch] ", line, "\n")); }

struct Stream {
  int fd = -1;
  int out_fd;  // where its lines go
  std::string partial;
};

struct Task {
  std::string job;
  int index = 0;
  std::string address;
  std::vector<std::string> argv;
  pid_t pid = -1;
  Stream out{-1, STDOUT_FILENO, ""}, err{-1, STDERR_FILENO, ""};
  int restarts = 0;
  bool running = false;
  bool finished_ok = false;
  std::string how;  // how it last ended
  std::string status_url;  // with --status_base_port
  std::string name() const { return absl::StrCat(job, ":", index); }
  bool is_ps() const { return job == "ps"; }
};

std::string Describe(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

class Launcher {
 public:
  Launcher(ClusterSpec cluster, std::vector<std::string> program, std::string ps_program, int status_base_port)
      : cluster_(std::move(cluster)) {
    const std::string spec = cluster_.ToFlagString().value_or(cluster_.ToJson());
    for (const auto& [job, tasks] : cluster_.job_map()) {
      for (const auto& [index, address] : tasks) {
        Task t;
        t.job = job;
        t.index = index;
        t.address = address;
        t.argv = job == "ps" ? std::vector<std::string>{ps_program} : program;
        t.argv.push_back("--job_name=" + job);
        t.argv.push_back(absl::StrCat("--task_index=", index));
        t.argv.push_back("--cluster_spec=" + spec);
        if (status_base_port > 0) {
          const int port = status_base_port + static_cast<int>(tasks_.size());
          t.argv.push_back(absl::StrCat("--status_port=", port));
          absl::StatusOr<std::pair<std::string, int>> hp = distflow::SplitHostPort(address);
          t.status_url = absl::StrCat("http://", hp.ok() ? hp->first : "127.0.0.1", ":", port, "/status");
        }
        tasks_.push_back(std::move(t));
      }
    }
  }

  int Run() {
    for (Task& t : tasks_) {
      if (!Start(t)) return Stop(1);
    }
    Say(absl::StrCat("started ", tasks_.size(), " tasks: ",
                     absl::StrJoin(tasks_, ", ", [](std::string* out, const Task& t) {
                       absl::StrAppend(out, t.name(), " (", t.address, ", pid ", t.pid, ")");
                     })));
    std::thread health([this] { WaitUntilUp(); });
    int code = Loop();
    health_stop_ = true;
    health.join();
    return code;
  }

 private:
  bool Start(Task& t) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      Complain(absl::StrCat("pipe: ", strerror(errno)));
      return false;
    }
    const std::string config = absl::StrCat("{\"cluster\": ", cluster_.ToJson(), ", \"task\": {\"type\": \"", t.job,
                                            "\", \"index\": ", t.index, "}}");
    std::vector<char*> argv;
    for (std::string& a : t.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      Complain(absl::StrCat("fork: ", strerror(errno)));
      return false;
    }
    if (pid == 0) {
      // The child: its own process group, dead when the launcher dies.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the launcher died before prctl
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGPIPE, SIG_DFL);
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      setenv("DISTFLOW_CONFIG", config.c_str(), 1);
      execvp(argv[0], argv.data());
      std::string msg = absl::StrCat("cannot run ", argv[0], ": ", strerror(errno), "\n");
      ssize_t ignored = write(STDERR_FILENO, msg.data(), msg.size());
      (void)ignored;
      _exit(127);
    }
    setpgid(pid, pid);  // also from here, so a signal sent right away finds the group
    close(out[1]);
    close(err[1]);
    t.pid = pid;
    t.out.fd = out[0];
    t.err.fd = err[0];
    t.running = true;
    return true;
  }

  // Copies whole lines of `s` with the task's prefix; at EOF, the rest too.
  void Pump(Task& t, Stream& s) {
    char buf[65536];
    ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    const std::string prefix = absl::StrCat("[", t.name(), "] ");
    if (n <= 0) {
      if (!s.partial.empty()) WriteAll(s.out_fd, absl::StrCat(prefix, s.partial, "\n"));
      s.partial.clear();
      close(s.fd);
      s.fd = -1;
      return;
    }
    s.partial.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    std::string lines;
    while ((nl = s.partial.find('\n', start)) != std::string::npos) {
      absl::StrAppend(&lines, prefix, absl::string_view(s.partial).substr(start, nl - start + 1));
      start = nl + 1;
    }
    s.partial.erase(0, start);
    if (s.partial.size() > (1 << 20)) {  // a line that never ends is cut, not hoarded
      absl::StrAppend(&lines, prefix, s.partial, "\n");
      s.partial.clear();
    }
    // Lines go out one write each: a write of up to PIPE_BUF bytes is atomic.
    size_t from = 0, end;
    while ((end = lines.find('\n', from)) != std::string::npos) {
      WriteAll(s.out_fd, lines.substr(from, end - from + 1));
      from = end + 1;
    }
  }

  void DrainOutput(Task& t) {
    for (Stream* s : {&t.out, &t.err}) {
      while (s->fd >= 0) Pump(t, *s);
    }
  }

  // Waits for events; returns the exit status of the launcher.
  int Loop() {
    absl::Time workers_done_at = absl::InfinitePast();
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<std::pair<Task*, Stream*>> owners;
      fds.push_back({g_signal_pipe[0], POLLIN, 0});
      owners.emplace_back(nullptr, nullptr);
      for (Task& t : tasks_) {
        for (Stream* s : {&t.out, &t.err}) {
          if (s->fd >= 0) {
            fds.push_back({s->fd, POLLIN, 0});
            owners.emplace_back(&t, s);
          }
        }
      }
      int ready = poll(fds.data(), fds.size(), 100);
      if (ready < 0 && errno != EINTR) {
        Complain(absl::StrCat("poll: ", strerror(errno)));
        return Stop(1);
      }
      for (size_t i = 1; ready > 0 && i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) Pump(*owners[i].first, *owners[i].second);
      }
      if (g_signals.load() > 0) {
        Say(absl::StrCat("stopping every task (", g_signals.load() > 1 ? "second signal" : "signal", ")"));
        return Stop(130);
      }
      // Tasks that ended.
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (Task& t : tasks_) {
          if (t.pid != pid || !t.running) continue;
          t.running = false;
          DrainOutput(t);
          t.how = Describe(status);
          const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
          if (ok || (t.is_ps() && AllWorkersDone() && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
            t.finished_ok = true;
            Say(absl::StrCat(t.name(), " finished"));
            continue;
          }
          if (t.restarts < absl::GetFlag(FLAGS_restart_on_failure)) {
            ++t.restarts;
            Say(absl::StrCat(t.name(), " ", t.how, "; restarting it (", t.restarts, " of ",
                             absl::GetFlag(FLAGS_restart_on_failure), ")"));
            if (!Start(t)) return Stop(1);
            continue;
          }
          Complain(absl::StrCat(t.name(), " ", t.how, "; stopping the other tasks"));
          failed_ = t.name() + " " + t.how;
          return Stop(1);
        }
      }
      if (AllWorkersDone()) {
        if (workers_done_at == absl::InfinitePast()) workers_done_at = absl::Now();
        bool ps_running = false;
        for (const Task& t : tasks_) ps_running = ps_running || t.running;
        if (!ps_running) {
          Say("every task finished");
          return 0;
        }
        if (absl::Now() - workers_done_at > absl::Seconds(absl::GetFlag(FLAGS_ps_exit_secs))) {
          std::vector<std::string> left;
          for (const Task& t : tasks_) {
            if (t.running) left.push_back(t.name());
          }
          Say(absl::StrCat("the workers finished but ", absl::StrJoin(left, ", "), " did not exit within ",
                           absl::GetFlag(FLAGS_ps_exit_secs), " s; stopping ", left.size() == 1 ? "it" : "them"));
          return Stop(0);
        }
      }
    }
  }

  bool AllWorkersDone() const {
    for (const Task& t : tasks_) {
      if (!t.is_ps() && !t.finished_ok) return false;
    }
    return true;
  }

  // SIGTERM to every running task's group, SIGKILL after the grace period
  // (or at a further signal); returns `code`.
  int Stop(int code) {
    for (Task& t : tasks_) {
      if (t.running) kill(-t.pid, SIGTERM);
    }
    const int signals_before = g_signals.load();
    const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_grace_secs));
    bool killed = false;
    for (;;) {
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (Task& t : tasks_) {
          if (t.pid == pid && t.running) {
            t.running = false;
            DrainOutput(t);
            t.how = Describe(status);
          }
        }
      }
      bool any = false;
      for (const Task& t : tasks_) any = any || t.running;
      if (!any) break;
      if (!killed && (absl::Now() > deadline || g_signals.load() > signals_before)) {
        for (Task& t : tasks_) {
          if (t.running) {
            Say(absl::StrCat(t.name(), " did not stop", g_signals.load() > signals_before ? "" : " in time",
                             "; killing it"));
            kill(-t.pid, SIGKILL);
          }
        }
        killed = true;
      }
      for (Task& t : tasks_) {
        for (Stream* s : {&t.out, &t.err}) {
          if (s->fd >= 0) {
            pollfd p{s->fd, POLLIN, 0};
            if (poll(&p, 1, 0) > 0) Pump(t, *s);
          }
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (!failed_.empty()) Complain(absl::StrCat("failed: ", failed_));
    return code;
  }

  // Prints "cluster up" once every task answers its health check.
  void WaitUntilUp() {
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + absl::Seconds(absl::GetFlag(FLAGS_up_timeout_secs));
    std::vector<bool> up(tasks_.size(), false);
    std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> stubs;
    grpc::ChannelArguments args;  // a task that starts late is seen soon after
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    for (const Task& t : tasks_) {
      stubs.push_back(grpc::health::v1::Health::NewStub(
          grpc::CreateCustomChannel(t.address, distflow::ClientCredentials(), args)));
    }
    while (!health_stop_) {
      size_t n = 0;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        if (!up[i]) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
          ctx.set_wait_for_ready(true);
          grpc::health::v1::HealthCheckRequest req;
          grpc::health::v1::HealthCheckResponse resp;
          grpc::Status s = stubs[i]->Check(&ctx, req, &resp);
          up[i] = s.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
        }
        n += up[i] ? 1 : 0;
      }
      if (n == tasks_.size()) {
        Say(absl::StrFormat("cluster up: all %d tasks serving after %.1f s", static_cast<int>(n),
                            absl::ToDoubleSeconds(absl::Now() - start)));
        if (!tasks_.empty() && !tasks_[0].status_url.empty()) {
          Say(absl::StrCat("status pages: ", absl::StrJoin(tasks_, ", ", [](std::string* out, const Task& t) {
                             absl::StrAppend(out, t.name(), " ", t.status_url);
                           })));
        }
        return;
      }
      if (absl::Now() > deadline) {
        std::vector<std::string> down;
        for (size_t i = 0; i < tasks_.size(); ++i) {
          if (!up[i]) down.push_back(absl::StrCat(tasks_[i].name(), " (", tasks_[i].address, ")"));
        }
        Complain(absl::StrCat("after ", absl::GetFlag(FLAGS_up_timeout_secs),
                              " s these tasks do not answer a health check: ", absl::StrJoin(down, ", ")));
        return;
      }
      for (int i = 0; i < 5 && !health_stop_; ++i) absl::SleepFor(absl::Milliseconds(40));
    }
  }

  ClusterSpec cluster_;
  std::vector<Task> tasks_;
  std::string failed_;
  std::atomic<bool> health_stop_{false};
};

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

int Usage(const std::string& what) {
  std::fprintf(stderr, "distflow-launch: %s\n", what.c_str());
  return 2;
}

// --emit: the manifests, on stdout or in --emit_file.
int Emit(const std::vector<std::string>& program) {
  const std::string kind = absl::GetFlag(FLAGS_emit);
  if (kind != "kubernetes" && kind != "slurm") {
    return Usage(absl::StrCat("--emit=", kind, " is not a cluster manager distflow-launch knows; use kubernetes or slurm"));
  }
  if (!absl::GetFlag(FLAGS_cluster_spec).empty()) {
    return Usage("--emit builds the cluster from --ps and --workers (the addresses come from the cluster manager); "
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
  absl::StatusOr<std::string> text =
      kind == "kubernetes" ? distflow::KubernetesManifests(o) : distflow::SlurmScript(o);
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
      "[ARGS...], or distflow-launch --cluster_spec=SPEC -- PROGRAM [ARGS...], or distflow-launch --emit "
      "kubernetes|slurm --ps N --workers M -- PROGRAM [ARGS...] to print manifests instead");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  // What follows "--" is the program; absl leaves it as positional arguments.
  std::vector<std::string> program(rest.begin() + 1, rest.end());
  if (program.empty()) return Usage("no program: put it after --, e.g. distflow-launch --workers 2 -- ./trainer");
  if (!absl::GetFlag(FLAGS_emit).empty()) return Emit(program);
  if (!absl::GetFlag(FLAGS_emit_file).empty()) return Usage("--emit_file needs --emit kubernetes or --emit slurm");

  absl::StatusOr<ClusterSpec> cluster;
  const std::string spec = absl::GetFlag(FLAGS_cluster_spec);
  if (!spec.empty()) {
    if (absl::GetFlag(FLAGS_base_port) != 0) return Usage("--base_port and --cluster_spec: pass one of them");
    cluster = ClusterSpec::Parse(spec);
    if (!cluster.ok()) return Usage(absl::StrCat("bad --cluster_spec: ", cluster.status().message()));
  } else {
    const int ps = absl::GetFlag(FLAGS_ps), workers = absl::GetFlag(FLAGS_workers);
    const int base = absl::GetFlag(FLAGS_base_port);
    const std::string host = absl::GetFlag(FLAGS_host);
    if (ps < 0 || workers < 1) return Usage(absl::StrCat("--ps=", ps, " --workers=", workers, ": need ps >= 0 and workers >= 1"));
    if (base < 0 || base + ps + workers - 1 > 65535) {
      return Usage(absl::StrCat("--base_port=", base, " leaves no room for ", ps + workers, " ports"));
    }
    ClusterSpec::JobMap jobs;
    int next = base;
    for (const auto& [job, n] : {std::pair<std::string, int>{"ps", ps}, {"worker", workers}}) {
      for (int i = 0; i < n; ++i) {
        int port = next;
        if (base == 0) {
          absl::StatusOr<int> free = distflow::PickUnusedTcpPort(host);
          // A host name: the port is checked on the wildcard address, which covers it.
          if (absl::IsInvalidArgument(free.status())) free = distflow::PickUnusedTcpPort("127.0.0.1");
          if (!free.ok()) return Usage(std::string(free.status().message()));
          port = *free;
        } else {
          ++next;
        }
        jobs[job][i] = absl::StrCat(host, ":", port);
      }
    }
    if (ps == 0) jobs.erase("ps");
    cluster = ClusterSpec::FromJobs(std::move(jobs));
    if (!cluster.ok()) return Usage(absl::StrCat("bad --host: ", cluster.status().message()));
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
  if (cluster->HasJob("ps") && !Executable(ps_program)) {
    return Usage(absl::StrCat("the ps program '", ps_program, "' does not exist or is not executable (--ps_program)"));
  }
  // Ports someone else holds: say so now rather than through a failing task.
  for (const auto& [job, tasks] : cluster->job_map()) {
    for (const auto& [index, address] : tasks) {
      absl::StatusOr<std::pair<std::string, int>> hp = distflow::SplitHostPort(address);
      if (!hp.ok()) continue;
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

  Launcher launcher(*cluster, program, ps_program, status_base);
  Say(absl::StrCat("cluster ", cluster->ToFlagString().value_or(cluster->ToJson())));
  return launcher.Run();
}
