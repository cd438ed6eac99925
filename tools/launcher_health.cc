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

void WaitUntilUp(const std::vector<std::pair<std::string, std::string>>& tasks, int up_timeout_secs,
                 const std::string& first_status_url, const std::vector<std::string>& status_urls,
                 const std::atomic<bool>& stop, Env* env) {
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
    for (size_t i = 0; i < tasks.size(); ++i) {
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
    if (n == tasks.size()) {
      Say(absl::StrFormat("cluster up: all %d tasks serving after %.1f s", static_cast<int>(n),
                          absl::ToDoubleSeconds(now() - start)));
      if (!first_status_url.empty()) Say(absl::StrCat("status pages: ", absl::StrJoin(status_urls, ", ")));
      return;
    }
    if (now() > deadline) {
      std::vector<std::string> down;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (!up[i]) down.push_back(absl::StrCat(tasks[i].first, " (", tasks[i].second, ")"));
      }
      Complain(absl::StrCat("after ", up_timeout_secs,
                            " s these tasks do not answer a health check: ", absl::StrJoin(down, ", ")));
      return;
    }
    for (int i = 0; i < 5 && !stop; ++i) env->SleepForMicros(40000);
  }
}

}  // namespace distflow
