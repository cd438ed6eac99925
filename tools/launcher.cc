#include "launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "base/ports.h"
#include "launcher_child.h"
#include "launcher_health.h"
#include "launcher_tasks.h"
#include "remote_shell.h"

namespace distflow {

namespace {

using Task = LaunchedTask;

class Launcher {
 public:
  Launcher(ClusterSpec cluster, LaunchOptions options, int signal_fd, const std::atomic<int>* signals)
      : cluster_(std::move(cluster)),
        options_(std::move(options)),
        env_(options_.env != nullptr ? options_.env : Env::Default()),
        signal_fd_(signal_fd),
        signals_(signals) {
    tasks_ = PlanTasks(cluster_, options_);
    hosts_ = options_.hosts;
    coordinator_ = CoordinatorAddress(cluster_, options_);
    joined_ = options_.join_workers;  // the joiners PlanTasks adds: worker:+1 ... +join_workers
  }

  int Run() {
    for (Task& t : tasks_) {
      if (!Start(t)) return Stop(1);
    }
    Say(absl::StrCat(
        "started ", tasks_.size(), " tasks: ", absl::StrJoin(tasks_, ", ", [](std::string* out, const Task& t) {
          absl::StrAppend(out, t.name(), " (", t.address, t.address.empty() ? "" : ", ", "pid ", t.pid, ")");
        })));
    // What the health checks need, copied: the loop may replace a worker meanwhile.
    std::vector<std::pair<std::string, std::string>> watched;
    for (const Task& t : tasks_) {
      if (!t.is_evaluator()) watched.emplace_back(t.name(), t.address);
    }
    std::string first_status_url = tasks_.empty() ? "" : tasks_[0].status_url;
    std::vector<std::string> status_urls;
    for (const Task& t : tasks_) {
      if (!t.status_url.empty()) status_urls.push_back(absl::StrCat(t.name(), " ", t.status_url));
    }
    std::thread health([this, watched = std::move(watched), first_status_url, status_urls = std::move(status_urls)] {
      WaitUntilUp(watched, options_.up_timeout_secs, first_status_url, status_urls, given_up_, health_stop_, env_);
    });
    int code = Loop();
    health_stop_ = true;
    health.join();
    return code;
  }

 private:
  bool Start(Task& t) {
    if (t.joins && !PrepareJoin(t)) return false;
    const std::string config = t.joins ? ""
                                       : absl::StrCat("{\"cluster\": ", cluster_.ToJson(), ", \"task\": {\"type\": \"",
                                                      t.job, "\", \"index\": ", t.index, "}}");
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(t.address);
    t.remote_host = hp.ok() ? hp->first : "";
    t.remote = hp.ok() && Remote(hp->first);
    Child child;
    const bool started = t.remote ? StartRemoteChild(options_.remote_shell, t.remote_host, t.argv, config, t.env,
                                                     options_.grace_secs, &child)
                                  : StartChild(t.argv, config, &child, t.env);
    if (!started) {
      failed_ = absl::StrCat(t.name(), " could not be started (see above)");
      return false;
    }
    t.pid = child.pid;
    t.out.fd = child.out_fd;
    t.err.fd = child.err_fd;
    t.in_fd = child.in_fd;
    t.running = true;
    return true;
  }

  // Whether a task on `host` runs through the remote shell.
  bool Remote(const std::string& host) {
    if (options_.remote_shell.empty() || !options_.only_host.empty()) return false;
    auto it = local_.find(host);
    if (it == local_.end()) it = local_.emplace(host, IsLocalHost(host)).first;
    return !it->second;
  }

  // SIGTERM to a task's process group; a remote task's stdin is closed too,
  // which stops it on its host (the remote shell may not pass the signal on).
  static void Terminate(Task& t) {
    kill(-t.pid, SIGTERM);
    CloseInput(t);
  }
  static void CloseInput(Task& t) {
    if (t.in_fd >= 0) close(t.in_fd);
    t.in_fd = -1;
  }

  // How a task ended, and where, for a remote one.
  std::string Describe(const Task& t, int status) const {
    return t.remote ? DescribeRemoteEnd(status, t.remote_host, options_.remote_shell) : DescribeWaitStatus(status);
  }

  // A joining worker's flags for this start: a free port of its own and
  // the coordinator to join through.
  bool PrepareJoin(Task& t) {
    std::string host = options_.join_host;
    if (Discovery()) {
      if (t.host.empty()) t.host = FreeSlotHost();
      if (t.host.empty()) {
        Complain(absl::StrCat("no free slot for ", t.name(), " on the hosts the discovery script lists"));
        return false;
      }
      host = t.host;
    }
    // Another machine's ports cannot be seen from here: one free here is a guess.
    absl::StatusOr<int> port = PickUnusedTcpPort(Remote(host) ? "127.0.0.1" : host);
    if (!port.ok()) {
      Complain(absl::StrCat("no free port for ", t.name(), " on ", host, ": ", port.status().message()));
      return false;
    }
    t.address = absl::StrCat(host, ":", *port);
    t.argv = options_.program;
    // In the environment, where the program's own argument parser cannot
    // take them for one of its flags (argparse reads --join=... as an
    // abbreviation of, say, --join-marker).
    t.env = {{"DISTFLOW_JOIN", coordinator_}, {"DISTFLOW_JOIN_AS", t.address}};
    return true;
  }

  bool Discovery() const { return !options_.host_discovery_script.empty(); }
  absl::Time Now() const { return absl::FromUnixMicros(env_->NowMicros()); }
  // Worker 0, unless a coordinator task holds the membership (then every
  // worker may be replaced, worker 0 too).
  bool IsChief(const Task& t) const {
    return t.is_worker() && !t.joins && t.index == 0 && !cluster_.HasJob(kCoordinatorJob);
  }

  // Workers running that the launcher is not stopping.
  int ActiveWorkers() const {
    int n = 0;
    for (const Task& t : tasks_) n += t.is_worker() && t.running && !t.removing ? 1 : 0;
    return n;
  }

  // The first listed host, not blacklisted, with a slot no active worker
  // holds; "" if none.
  std::string FreeSlotHost() const {
    for (const DiscoveredHost& h : hosts_) {
      if (blacklisted_.count(h.host)) continue;
      int used = 0;
      for (const Task& t : tasks_) used += t.is_worker() && t.running && !t.removing && t.host == h.host ? 1 : 0;
      if (used < h.slots) return h.host;
    }
    return "";
  }

  // Runs the discovery script; on an answer, the hosts to rebalance to.
  void Discover() {
    absl::StatusOr<std::vector<DiscoveredHost>> found =
        DiscoverHosts(options_.host_discovery_script, absl::Seconds(options_.discovery_timeout_secs));
    if (!found.ok()) {
      const std::string msg = std::string(found.status().message());
      if (msg != last_discovery_error_) Complain(absl::StrCat(msg, "; the job keeps its workers as they are"));
      last_discovery_error_ = msg;
      return;
    }
    last_discovery_error_.clear();
    auto describe = [](const std::vector<DiscoveredHost>& hosts) {
      return absl::StrJoin(
          hosts, ", ", [](std::string* out, const DiscoveredHost& h) { absl::StrAppend(out, h.host, ":", h.slots); });
    };
    if (describe(*found) != describe(hosts_)) {
      Say(absl::StrCat("the discovery script lists ", found->empty() ? "no hosts" : describe(*found)));
    }
    hosts_ = std::move(*found);
    rebalance_ = true;
  }

  // Stops the workers of hosts that went away (or list fewer slots, or are
  // blacklisted), then starts joining workers on free slots up to
  // max_workers. Never stops the chief nor goes below min_workers; does
  // nothing once the job is ending. False if a start failed.
  bool Rebalance() {
    rebalance_ = false;
    if (!Discovery() || ending_) return true;
    std::map<std::string, int> slots, used;
    for (const DiscoveredHost& h : hosts_) {
      if (!blacklisted_.count(h.host)) slots[h.host] = h.slots;
    }
    for (Task& t : tasks_) {
      if (!t.is_worker() || !t.running || t.removing) continue;
      auto it = slots.find(t.host);
      if ((it != slots.end() && used[t.host] < it->second) || IsChief(t)) {
        ++used[t.host];
        continue;
      }
      if (ActiveWorkers() - 1 < options_.min_workers) {
        if (below_min_warned_.insert(t.name()).second) {
          Say(absl::StrCat(t.host, " no longer has a slot for ", t.name(), ", but stopping it would leave fewer than ",
                           "--min_workers=", options_.min_workers, " workers; it keeps running"));
        }
        ++used[t.host];
        continue;
      }
      Say(absl::StrCat(t.name(), " on ", t.host, ": the host ",
                       blacklisted_.count(t.host) ? "is blacklisted"
                       : it == slots.end()        ? "is no longer listed"
                                                  : absl::StrCat("lists ", it->second, " slot(s) now"),
                       "; stopping the worker"));
      t.removing = true;
      Terminate(t);
    }
    while (ActiveWorkers() < options_.max_workers) {
      const std::string host = FreeSlotHost();
      if (host.empty()) break;
      Task t;
      t.job = "worker";
      t.index = ++joined_;
      t.joins = true;
      t.host = host;
      t.argv = options_.program;
      tasks_.push_back(std::move(t));
      Say(absl::StrCat(host, " has a free slot: ", tasks_.back().name(), " joins the job there"));
      if (!Start(tasks_.back())) return false;
    }
    return true;
  }

  // Workers running or done (elastic: the job needs min_workers of them).
  int WorkersLeft() const {
    int n = 0;
    for (const Task& t : tasks_) n += t.is_worker() && (t.running || t.finished_ok) ? 1 : 0;
    return n;
  }

  // Copies whole lines of `s` with the task's prefix; at EOF, the rest too.
  void Pump(Task& t, Stream& s) { PumpLines(absl::StrCat("[", t.name(), "] "), s); }

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
      fds.push_back({signal_fd_, POLLIN, 0});
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
      if (signals_->load() > 0) {
        Say(absl::StrCat("stopping every task (", signals_->load() > 1 ? "second signal" : "signal", ")"));
        return Stop(130);
      }
      // Tasks that ended.
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (Task& t : tasks_) {
          if (t.pid != pid || !t.running) continue;
          t.running = false;
          CloseInput(t);
          DrainOutput(t);
          t.how = Describe(t, status);
          const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
          if (t.removing) {
            Say(absl::StrCat(t.name(), " stopped (", t.how, "); it is not replaced"));
            given_up_.Add(t.name(), t.how);
            gone_.push_back(t.name());
            rebalance_ = true;
            continue;
          }
          if (ok || ((t.is_ps() || t.is_coordinator()) && AllWorkersDone() && WIFSIGNALED(status) &&
                     WTERMSIG(status) == SIGTERM)) {
            t.finished_ok = true;
            given_up_.Add(t.name(), t.how);
            if (t.is_worker()) ending_ = true;  // the job is ending: no more workers start or stop
            Say(absl::StrCat(t.name(), " finished"));
            continue;
          }
          const bool chief = IsChief(t);
          if (Discovery() && t.is_worker() && !chief && !coordinator_.empty()) {
            // The host takes the blame; a free slot (maybe elsewhere) takes a new worker.
            const int failures = ++host_failures_[t.host];
            Say(absl::StrCat(t.name(), t.remote ? "" : absl::StrCat(" on ", t.host), " ", t.how, " (", failures,
                             " failure(s) on that host)"));
            if (failures >= options_.host_failures_to_blacklist && blacklisted_.insert(t.host).second) {
              Say(absl::StrCat("host ", t.host, " is blacklisted: ", failures,
                               " of its workers failed; no worker starts there again"));
            }
            given_up_.Add(t.name(), t.how);
            gone_.push_back(t.name());
            rebalance_ = true;
            check_min_ = true;
            continue;
          }
          if (!coordinator_.empty() && t.is_worker() && !chief) {
            // Elastic: a new worker joins in its place; nobody else restarts.
            given_up_.Add(t.name(), t.how);  // the new one has a name and address of its own
            if (replacements_ < options_.restart_on_failure) {
              ++replacements_;
              Say(absl::StrCat(t.name(), " ", t.how, "; a new worker joins the job in its place (", replacements_,
                               " of ", options_.restart_on_failure, " replacements)"));
              t.joins = true;
              t.index = ++joined_;
              if (!Start(t)) return Stop(1);
              continue;
            }
            t.finished_ok = false;
            Say(absl::StrCat(t.name(), " ", t.how,
                             "; no replacement left (--restart_on_failure=", options_.restart_on_failure, ")"));
            if (WorkersLeft() < options_.min_workers) {
              failed_ = absl::StrCat(t.name(), " ", t.how, ": ", WorkersLeft(), " workers are left, fewer than ",
                                     "--min_workers=", options_.min_workers);
              Complain(absl::StrCat(failed_, "; stopping the other tasks"));
              return Stop(1);
            }
            gone_.push_back(t.name());
            continue;
          }
          if (t.restarts < options_.restart_on_failure) {
            ++t.restarts;
            Say(absl::StrCat(t.name(), " ", t.how, "; restarting it (", t.restarts, " of ", options_.restart_on_failure,
                             ")"));
            if (!Start(t)) return Stop(1);
            continue;
          }
          Complain(absl::StrCat(t.name(), " ", t.how, "; stopping the other tasks"));
          failed_ = t.name() + " " + t.how;
          return Stop(1);
        }
      }
      if (Discovery() && !ending_ && Now() >= next_discovery_) {
        Discover();
        next_discovery_ = Now() + absl::Seconds(options_.discovery_interval_secs);
      }
      if (rebalance_ && !Rebalance()) return Stop(1);
      if (check_min_) {
        check_min_ = false;
        if (WorkersLeft() < options_.min_workers) {
          failed_ =
              absl::StrCat(WorkersLeft(), " workers are left, fewer than --min_workers=", options_.min_workers,
                           ", and the hosts the discovery script lists have no free slot that is not blacklisted");
          Complain(absl::StrCat(failed_, "; stopping the other tasks"));
          return Stop(1);
        }
      }
      if (AllWorkersDone()) {
        if (workers_done_at == absl::InfinitePast()) {
          workers_done_at = Now();
          // The coordinator task serves the workers only: it ends with them.
          for (Task& t : tasks_) {
            if (t.is_coordinator() && t.running) Terminate(t);
          }
        }
        bool ps_running = false;
        for (const Task& t : tasks_) ps_running = ps_running || t.running;
        if (!ps_running) {
          Say("every task finished");
          return 0;
        }
        if (HasWorkers() && Now() - workers_done_at > absl::Seconds(options_.ps_exit_secs)) {
          std::vector<std::string> left;
          for (const Task& t : tasks_) {
            if (t.running) left.push_back(t.name());
          }
          Say(absl::StrCat("the workers finished but ", absl::StrJoin(left, ", "), " did not exit within ",
                           options_.ps_exit_secs, " s; stopping ", left.size() == 1 ? "it" : "them"));
          return Stop(0);
        }
      }
    }
  }

  // Whether any worker runs here (not so for the ps machine's launcher of a
  // cluster spread over machines: its ps tasks end when the chief ends them).
  bool HasWorkers() const {
    for (const Task& t : tasks_) {
      if (!t.is_ps() && !t.is_coordinator()) return true;
    }
    return options_.only_host.empty();
  }

  bool AllWorkersDone() const {
    for (const Task& t : tasks_) {
      if (t.is_ps() || t.is_coordinator() || t.finished_ok) continue;
      // Elastic: a worker that failed and was not replaced is not waited for.
      if (!t.running && std::find(gone_.begin(), gone_.end(), t.name()) != gone_.end()) continue;
      return false;
    }
    return true;
  }

  // SIGTERM to every running task's group, SIGKILL after the grace period
  // (or at a further signal); returns `code`.
  int Stop(int code) {
    for (Task& t : tasks_) {
      if (t.running) Terminate(t);
    }
    const int signals_before = signals_->load();
    const absl::Time deadline = Now() + absl::Seconds(options_.grace_secs);
    bool killed = false;
    for (;;) {
      int status;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (Task& t : tasks_) {
          if (t.pid == pid && t.running) {
            t.running = false;
            CloseInput(t);
            DrainOutput(t);
            t.how = Describe(t, status);
          }
        }
      }
      bool any = false;
      for (const Task& t : tasks_) any = any || t.running;
      if (!any) break;
      if (!killed && (Now() > deadline || signals_->load() > signals_before)) {
        for (Task& t : tasks_) {
          if (t.running) {
            Say(absl::StrCat(t.name(), " did not stop", signals_->load() > signals_before ? "" : " in time",
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
      env_->SleepForMicros(20000);
    }
    if (!failed_.empty()) Complain(absl::StrCat("failed: ", failed_));
    return code;
  }

  ClusterSpec cluster_;
  const LaunchOptions options_;
  Env* const env_;  // options_.env or the real clock
  const int signal_fd_;
  const std::atomic<int>* const signals_;
  std::vector<Task> tasks_;
  std::string coordinator_;        // elastic: ps 0's address, where workers join
  int joined_ = 0;                 // elastic: joining workers started so far
  int replacements_ = 0;           // elastic: failed workers replaced
  std::vector<std::string> gone_;  // elastic: failed workers not replaced
  // Host discovery.
  std::vector<DiscoveredHost> hosts_;  // the script's last good answer
  std::set<std::string> blacklisted_;
  std::map<std::string, bool> local_;  // host -> this machine (IsLocalHost), asked once
  std::map<std::string, int> host_failures_;
  std::set<std::string> below_min_warned_;
  std::string last_discovery_error_;
  absl::Time next_discovery_ = absl::InfinitePast();
  bool rebalance_ = false, check_min_ = false, ending_ = false;
  std::string failed_;
  std::atomic<bool> health_stop_{false};
  // Tasks that ended and will not serve at their address again: the health
  // checks stop waiting for them (a joiner on a broken host fails at once).
  GivenUpTasks given_up_;
};

}  // namespace

int RunCluster(const ClusterSpec& cluster, LaunchOptions options, int signal_fd, const std::atomic<int>* signals) {
  Launcher launcher(cluster, std::move(options), signal_fd, signals);
  return launcher.Run();
}

}  // namespace distflow
