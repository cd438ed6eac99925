// The launcher's "cluster up" (launcher.cc): gRPC health checks of every
// task until all of them serve. Internal to distflow-launch.
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

namespace distflow {

class Env;

// Checks every task of `tasks` (name, address) until all answer SERVING,
// then says "cluster up" (and the `status_urls` when `first_status_url` is
// not empty); after `up_timeout_secs` it names those that do not answer.
// Returns then, or soon after `stop` becomes true. The wait is measured on
// `env`'s clock (each check's own 500 ms deadline is gRPC's, on the real
// one). Thread-safe: runs on a thread of its own.
void WaitUntilUp(const std::vector<std::pair<std::string, std::string>>& tasks, int up_timeout_secs,
                 const std::string& first_status_url, const std::vector<std::string>& status_urls,
                 const std::atomic<bool>& stop, Env* env);

}  // namespace distflow
