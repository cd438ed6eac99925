// The launcher's "cluster up" (launcher.cc): gRPC health checks of every
// task until all of them serve (or have been given up on). Internal to distflow-launch.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace distflow {

class Env;

// The tasks "cluster up" no longer waits for, by name, each with how it
// ended: tasks that will not serve at their address again (failed and not
// restarted there, replaced by a new joining worker, stopped, finished).
// Thread-safe: the launcher's loop adds, the health checks' thread reads.
class GivenUpTasks {
 public:
  void Add(const std::string& name, const std::string& how);
  // How `name` ended, if it was given up on.
  std::optional<std::string> Find(const std::string& name) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> how_ ABSL_GUARDED_BY(mu_);
};

// Checks every task of `tasks` (name, address) until all answer SERVING,
// but for those `given_up` names (a joiner on a broken host, say, which
// fails at once), then says "cluster up" (naming the ones not waited for,
// and the `status_urls` when `first_status_url` is not empty); after
// `up_timeout_secs` it names those that do not answer. Returns then, or
// soon after `stop` becomes true. The wait is measured on `env`'s clock
// (each check's own 500 ms deadline is gRPC's, on the real one).
// Thread-safe: runs on a thread of its own.
void WaitUntilUp(const std::vector<std::pair<std::string, std::string>>& tasks, int up_timeout_secs,
                 const std::string& first_status_url, const std::vector<std::string>& status_urls,
                 const GivenUpTasks& given_up, const std::atomic<bool>& stop, Env* env);

}  // namespace distflow
