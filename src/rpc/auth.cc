#include "rpc/auth.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace distflow {
namespace {

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

absl::Status CheckTlsCanServe() { return ServerCredentials().status(); }

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials() {
  std::string cert, key, ca;
  if (!ProcessTlsPem(&cert, &key, &ca)) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca;  // empty: the system's roots
  o.pem_private_key = key;
  o.pem_cert_chain = cert;
  return grpc::SslCredentials(o);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials() {
  std::string cert, key, ca;
  if (!ProcessTlsPem(&cert, &key, &ca)) return grpc::InsecureServerCredentials();
  if (cert.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS is on but this task has no certificate to serve with: set "
                     "--tls_cert and --tls_key (or ",
                     kTlsCertEnv, " and ", kTlsKeyEnv, ")"));
  }
  grpc::SslServerCredentialsOptions o(ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = ca;
  o.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::Channel> NewAuthenticatedChannel(const std::string& address, const grpc::ChannelArguments& args,
                                                       const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(address, ClientCredentials(), args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, ClientCredentials(), args,
                                                                 std::move(interceptors));
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

}  // namespace distflow
