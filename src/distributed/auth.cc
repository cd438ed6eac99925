#include "distributed/auth.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace distflow {
namespace {

struct TokenState {
  absl::Mutex mu;
  bool set = false;
  std::string token;
};

TokenState& State() {
  static TokenState* s = new TokenState();
  return *s;
}

class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthTokenMetadataKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;  // owned by the factory, which the channel keeps
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

std::string ClusterToken() {
  TokenState& s = State();
  absl::MutexLock lock(&s.mu);
  if (!s.set) {
    const char* env = std::getenv(kAuthTokenEnv);
    s.token = env != nullptr ? std::string(absl::StripAsciiWhitespace(env)) : "";
    s.set = true;
  }
  return s.token;
}

void SetClusterToken(std::string token) {
  TokenState& s = State();
  absl::MutexLock lock(&s.mu);
  s.token = std::move(token);
  s.set = true;
}

absl::Status LoadClusterTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the token file '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the token file '", path, "' is empty; put the cluster's secret in it"));
  }
  if (absl::Status s = ValidateToken(token, absl::StrCat("the token in '", path, "'")); !s.ok()) return s;
  SetClusterToken(std::move(token));
  return absl::OkStatus();
}

absl::Status ValidateToken(const std::string& token, const std::string& source) {
  if (token.size() > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(source, " has ", token.size(), " bytes; at most 4096"));
  }
  for (char c : token) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, " holds a byte that is not printable ASCII; use letters, digits and punctuation "
                               "(e.g. the output of: openssl rand -hex 32)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SetUpClusterToken(const std::string& token_file) {
  if (!token_file.empty()) return LoadClusterTokenFile(token_file);
  const std::string token = ClusterToken();
  if (token.empty()) return absl::OkStatus();
  return ValidateToken(token, kAuthTokenEnv);
}

std::shared_ptr<grpc::Channel> NewAuthenticatedChannel(const std::string& address, const grpc::ChannelArguments& args,
                                                       const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, grpc::InsecureChannelCredentials(), args,
                                                                 std::move(interceptors));
}

bool TokensEqual(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  for (size_t i = 0; i < longer.size(); ++i) {
    const unsigned char x = i < shorter.size() ? static_cast<unsigned char>(shorter[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ static_cast<unsigned char>(longer[i]));
  }
  return diff == 0;
}

grpc::Status CheckCallToken(const grpc::ServerContextBase& ctx, const std::string& expected,
                            const std::string& server) {
  if (expected.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kAuthTokenMetadataKey);
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(server, " requires the cluster's token and this call carries none: set ",
                                     kAuthTokenEnv, " (or --auth_token_file) to the cluster's token"));
  }
  if (!TokensEqual(std::string(it->second.data(), it->second.size()), expected)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(server, " refused this call: its token is not the cluster's (check ",
                                     kAuthTokenEnv, " or --auth_token_file)"));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* RefuseUnauthenticated(grpc::CallbackServerContext* ctx, const std::string& expected,
                                                const std::string& server) {
  grpc::Status s = CheckCallToken(*ctx, expected, server);
  if (s.ok()) return nullptr;
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(s);
  return r;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.") ||
         absl::EndsWith(host, ".localhost");
}

}  // namespace distflow
