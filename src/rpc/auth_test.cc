#include "rpc/auth.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "bulk/bulk_transfer.h"
#include "distflow/server.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"

namespace distflow {
namespace {

TEST(Auth, TokensCompareByEveryByte) {
  EXPECT_TRUE(TokensEqual("s3cret", "s3cret"));
  EXPECT_FALSE(TokensEqual("s3cret", "s3creT"));
  EXPECT_FALSE(TokensEqual("s3cret", "s3cret2"));
  EXPECT_FALSE(TokensEqual("", "x"));
  EXPECT_TRUE(TokensEqual("", ""));
}

TEST(Auth, TokenFilesAndTokensAreChecked) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/token", empty = dir + "/empty", binary = dir + "/binary";
  std::ofstream(good) << "  abc-123\n";
  std::ofstream(empty) << "\n";
  std::ofstream(binary) << "ab\x01"
                           "c";
  ASSERT_TRUE(LoadClusterTokenFile(good).ok());
  EXPECT_EQ(ClusterToken(), "abc-123") << "surrounding whitespace is dropped";
  absl::Status s = LoadClusterTokenFile(dir + "/missing");
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot read the token file")) << s;
  s = LoadClusterTokenFile(empty);
  EXPECT_TRUE(absl::StrContains(s.message(), "is empty")) << s;
  s = LoadClusterTokenFile(binary);
  EXPECT_TRUE(absl::StrContains(s.message(), "not printable ASCII")) << s;
  EXPECT_FALSE(ValidateToken(std::string(5000, 'a'), "DISTFLOW_AUTH_TOKEN").ok());
  EXPECT_EQ(ClusterToken(), "abc-123") << "a refused file leaves the token as it was";
  SetClusterToken("");
}

TEST(Auth, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.1.2.3"));
  EXPECT_FALSE(IsLoopbackHost("worker-0.example"));
}

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(0, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ServerOptions o;
    o.auth_token = "the-cluster-secret";
    auto servers = StartLocalCluster(*spec, o);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    address_ = servers_[0]->target().substr(7);  // drop grpc://
  }
  grpc::Status GetStatus(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = proto::WorkerService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    proto::GetStatusRequest req;
    proto::GetStatusResponse resp;
    return stub->GetStatus(&ctx, req, &resp);
  }
  std::vector<std::unique_ptr<Server>> servers_;
  std::string address_;
};

TEST_F(AuthServerTest, CallsWithoutTheTokenAreRefusedWithTheFix) {
  grpc::Status none = GetStatus(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StrContains(none.error_message(), "requires the cluster's token")) << none.error_message();
  EXPECT_TRUE(absl::StrContains(none.error_message(), "DISTFLOW_AUTH_TOKEN")) << none.error_message();

  grpc::Status wrong = GetStatus(NewAuthenticatedChannel(address_, grpc::ChannelArguments(), "a-guess"));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(absl::StrContains(wrong.error_message(), "is not the cluster's")) << wrong.error_message();

  EXPECT_TRUE(GetStatus(NewAuthenticatedChannel(address_, grpc::ChannelArguments(), "the-cluster-secret")).ok());
}

TEST_F(AuthServerTest, ShutdownFromAStrangerIsRefused) {
  auto stub = proto::WorkerService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  proto::ShutdownRequest req;
  req.set_reason("an outsider");
  proto::ShutdownResponse resp;
  EXPECT_EQ(stub->Shutdown(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Still serving.
  EXPECT_TRUE(GetStatus(NewAuthenticatedChannel(address_, grpc::ChannelArguments(), "the-cluster-secret")).ok());
}

Tensor Bytes(int64_t n) {
  Tensor t = Tensor::Allocate(DT_UINT8, TensorShape({n})).value();
  for (int64_t i = 0; i < n; ++i) t.flat<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
  return t;
}

TEST(BulkAuth, TheBulkPortRefusesConnectionsWithoutTheToken) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "bulk-secret");
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Bytes(1 << 20);
  const uint64_t ticket = (*server)->Offer(t);
  Tensor dst = Tensor::Allocate(DT_UINT8, t.shape()).value();
  for (const char* token : {"", "not-it"}) {
    BulkClient stranger(BulkClient::kClientIdleTimeout, token);
    absl::Status s = stranger.Fetch("127.0.0.1", (*server)->port(), ticket, dst.raw_data(), dst.TotalBytes(), nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "DISTFLOW_AUTH_TOKEN")) << s;
    absl::StatusOr<uint64_t> put = stranger.Put("127.0.0.1", (*server)->port(), t.raw_data(), t.TotalBytes());
    EXPECT_FALSE(put.ok());
  }
  EXPECT_EQ((*server)->NumOffersForTest(), 1u) << "the refused clients took nothing";
  EXPECT_EQ((*server)->NumReceivedForTest(), 0u) << "and left nothing";

  BulkClient member(BulkClient::kClientIdleTimeout, "bulk-secret");
  absl::Status s = member.Fetch("127.0.0.1", (*server)->port(), ticket, dst.raw_data(), dst.TotalBytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(dst.raw_data(), t.raw_data(), t.TotalBytes()), 0);
}

TEST(BulkAuth, ARawConnectionIsClosedWithoutReadingARequest) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "bulk-secret");
  ASSERT_TRUE(server.ok()) << server.status();
  const uint64_t ticket = (*server)->Offer(Bytes(1 << 20));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  // A get request as the protocol had it before hellos: magic, version, ticket.
  char req[16] = {'D', 'F', 'B', 'K', 1, 0, 0, 0};
  std::memcpy(req + 8, &ticket, sizeof(ticket));
  ASSERT_EQ(send(fd, req, sizeof(req), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(req)));
  char buf[64];
  ssize_t n = recv(fd, buf, sizeof(buf), 0);
  EXPECT_LE(n, 0) << "closed (or reset) without an answer";
  close(fd);
  EXPECT_EQ((*server)->NumOffersForTest(), 1u) << "nothing was served";
}

}  // namespace
}  // namespace distflow
