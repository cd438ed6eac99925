#include "runtime/session_factory.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace distflow {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, SessionFactory> factories ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

void RegisterSessionFactory(const std::string& prefix, SessionFactory factory) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.factories[prefix] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<SessionInterface>> NewSession(const std::string& target, SessionOptions options) {
  if (target.empty() || target == "local") return std::make_unique<LocalSession>(std::move(options));
  SessionFactory factory;
  std::string expected = "\"\", \"local\"";
  {
    Registry& r = GetRegistry();
    absl::MutexLock lock(&r.mu);
    size_t longest = 0;
    for (const auto& [prefix, f] : r.factories) {
      absl::StrAppend(&expected, " or \"", prefix, "host:port\"");
      if (!prefix.empty() && absl::StartsWith(target, prefix) && prefix.size() > longest) {
        longest = prefix.size();
        factory = f;
      }
    }
  }
  if (factory) return factory(target, std::move(options));
  if (absl::StartsWith(target, "grpc://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session target '", target,
                     "' needs the distributed runtime, which this program does not register (link distflow_server and "
                     "create a Server or call RegisterGrpcSessionFactory)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("Unknown session target '", target, "'; expected ", expected));
}

}  // namespace distflow
