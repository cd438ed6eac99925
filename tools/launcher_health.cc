#include "launcher_health.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "launcher.h"
#include "proto/health.grpc.pb.h"
#include "rpc/auth.h"

namespace distflow {

void GivenUpTasks::Add(const std::string& name, const std::string& how) {
  absl::MutexLock lock(&mu_);
  how_[name] = how;
}

std::optional<std::string> GivenUpTasks::Find(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = how_.find(name);
  if (it == how_.end()) return std::nullopt;
  return it->second;
}

void WaitUntilUp(const std::vector<std::pair<std::string, std::string>>& tasks, int up_timeout_secs,
                 const std::string& first_status_url, const std::vector<std::string>& status_urls,
                 const GivenUpTasks& given_up, const std::atomic<bool>& stop, Env* env) {
  auto now = [env] { return absl::FromUnixMicros(env->NowMicros()); };
  const absl::Time start = now();
  const absl::Time deadline = start + absl::Seconds(up_timeout_secs);
  std::vector<bool> up(tasks.size(), false);
  std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> stubs;
  grpc::ChannelArguments args;  // a task that starts late is seen soon after
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  for (const auto& [name, address] : tasks) {
    stubs.push_back(
        grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(address, distflow::ClientCredentials(), args)));
  }
  while (!stop) {
    size_t n = 0;
    std::vector<std::string> not_waited;  // "worker:+1, which exited with status 1"
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (!up[i]) {
        if (std::optional<std::string> how = given_up.Find(tasks[i].first)) {
          not_waited.push_back(absl::StrCat(tasks[i].first, ", which ", *how));
          continue;
        }
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
    if (n + not_waited.size() == tasks.size() && (n > 0 || tasks.empty())) {
      if (not_waited.empty()) {
        Say(absl::StrFormat("cluster up: all %d tasks serving after %.1f s", static_cast<int>(n),
                            absl::ToDoubleSeconds(now() - start)));
      } else {
        Say(absl::StrFormat("cluster up: %d tasks serving after %.1f s; not waiting for %s", static_cast<int>(n),
                            absl::ToDoubleSeconds(now() - start), absl::StrJoin(not_waited, "; ")));
      }
      if (!first_status_url.empty()) Say(absl::StrCat("status pages: ", absl::StrJoin(status_urls, ", ")));
      return;
    }
    if (now() > deadline) {
      std::vector<std::string> down;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (!up[i] && !given_up.Find(tasks[i].first)) {
          down.push_back(absl::StrCat(tasks[i].first, " (", tasks[i].second, ")"));
        }
      }
      if (!down.empty()) {
        Complain(absl::StrCat("after ", up_timeout_secs,
                              " s these tasks do not answer a health check: ", absl::StrJoin(down, ", ")));
      }
      return;
    }
    for (int i = 0; i < 5 && !stop; ++i) env->SleepForMicros(40000);
  }
}

}  // namespace distflow
