// TLS on the bulk-transfer port: tensors cross encrypted, straight from and
// into the tensors' memory, and only peers TLS admits get a byte.
//
// Certificates come from the openssl tool (subprocess.h). The cluster test
// turns TLS on for this whole process and off again at its end.
#include "bulk/bulk_tls.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bulk/bulk_transfer.h"
#include "distflow/auth.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "server/grpc_server.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::MakeCertificates;
using subprocess::TempPath;

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = Env::Default()->ReadFile(path);
  return s.ok() ? *s : "";
}

// A CA and a node certificate for localhost / 127.0.0.1 it signed, and a
// second, unrelated CA with its own node certificate ("rogue").
class BulkTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempPath("bulk_tls"));
    ok_ = MakeCertificates(*dir_, "") && MakeCertificates(*dir_, "rogue_");
  }
  void SetUp() override { ASSERT_TRUE(ok_) << "openssl failed in " << *dir_; }
  static std::string File(const std::string& name) { return Read(*dir_ + "/" + name); }
  // TLS with the node's identity; trusts `ca` (e.g. "ca.pem", "" for the system's roots).
  static std::shared_ptr<const BulkTls> Tls(const std::string& prefix, const std::string& ca) {
    absl::StatusOr<std::shared_ptr<const BulkTls>> t =
        BulkTls::Create(File(prefix + "node.pem"), File(prefix + "node.key"), ca.empty() ? "" : File(ca));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : nullptr;
  }
  static Tensor Pattern(int64_t n) {
    Tensor t(DT_FLOAT, TensorShape({n}));
    absl::Span<float> p = t.flat<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 9973) * 0.5f;
    return t;
  }

  static std::string* dir_;
  static bool ok_;
};
std::string* BulkTlsTest::dir_ = nullptr;
bool BulkTlsTest::ok_ = false;

// With TLS on, same-host shared memory is offered only when the cluster
// token can authenticate a local peer (docs/TRANSPORT.md); a TLS client then
// learns the socket over TLS and moves the bytes through shared memory.
TEST_F(BulkTlsTest, SharedMemoryUnderTlsNeedsTheToken) {
  auto tokenless = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "", Tls("", "ca.pem"));
  ASSERT_TRUE(tokenless.ok()) << tokenless.status();
  absl::Status refused = (*tokenless)->EnableSharedMemory();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "DISTFLOW_AUTH_TOKEN")) << refused;
  EXPECT_FALSE((*tokenless)->shared_memory_enabled());

  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "tok", Tls("", "ca.pem"));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->EnableSharedMemory().ok());
  BulkClient client(BulkClient::kClientIdleTimeout, "tok", Tls("", "ca.pem"));
  client.set_shared_memory(true);
  Tensor t = Pattern((1 << 20) + 3);
  std::vector<char> got(t.TotalBytes());
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), got.data(), got.size(), nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(got.data(), t.raw_data(), got.size()), 0);
  EXPECT_EQ((*server)->shm_bytes_served(), t.TotalBytes()) << "through shared memory, the token checked";
}

TEST_F(BulkTlsTest, TensorsCrossEncryptedBothWays) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "tok", Tls("", "ca.pem"));
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client(BulkClient::kClientIdleTimeout, "tok", Tls("", "ca.pem"));
  // A get: 4 MiB offered, fetched into a buffer of its size.
  Tensor t = Pattern(1 << 20);
  const uint64_t ticket = (*server)->Offer(t);
  ASSERT_NE(ticket, 0u);
  std::vector<char> got(t.TotalBytes());
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), ticket, got.data(), got.size(), nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(got.data(), t.raw_data(), got.size()), 0);
  EXPECT_EQ((*server)->bytes_served(), t.TotalBytes());
  // A put of 3 MiB + 1 byte on the pooled connection, taken back as bytes.
  std::vector<char> bytes((3 << 20) + 1);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  absl::StatusOr<uint64_t> put = client.Put("127.0.0.1", (*server)->port(), bytes.data(), bytes.size());
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<Tensor> back =
      (*server)->TakeReceived(*put, DT_UINT8, TensorShape({static_cast<int64_t>(bytes.size())}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::memcmp(back->raw_data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(client.NumPooledForTest(), 1u) << "one TLS connection served both";
}

TEST_F(BulkTlsTest, AHostNameTheCertificateCarriesIsAccepted) {
  auto server = BulkServer::Start("localhost", absl::Seconds(60), 0, "", Tls("", "ca.pem"));
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client(BulkClient::kClientIdleTimeout, "", Tls("", "ca.pem"));
  Tensor t = Pattern(1 << 18);
  std::vector<char> got(t.TotalBytes());
  absl::Status s = client.Fetch("localhost", (*server)->port(), (*server)->Offer(t), got.data(), got.size(), nullptr);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(BulkTlsTest, APlainClientGetsNothingFromATlsPort) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "", Tls("", "ca.pem"));
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient plain;
  Tensor t = Pattern(1 << 18);
  const uint64_t ticket = (*server)->Offer(t);
  std::vector<char> got(t.TotalBytes());
  absl::Status s =
      plain.Fetch("127.0.0.1", (*server)->port(), ticket, got.data(), got.size(), nullptr, absl::Seconds(10));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ((*server)->bytes_served(), 0u);
  EXPECT_EQ((*server)->NumOffersForTest(), 1u) << "the offer waits for a peer TLS admits";
}

TEST_F(BulkTlsTest, ATlsClientOfAPlainPortIsToldTheHandshakeFailed) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client(BulkClient::kClientIdleTimeout, "", Tls("", "ca.pem"));
  std::vector<char> got(16);
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), 1, got.data(), got.size(), nullptr, absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the TLS handshake failed")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "is the peer running without TLS?")) << s;
}

TEST_F(BulkTlsTest, AServerSignedByAnotherCaIsRefusedNamingWhy) {
  // The server's certificate is from the rogue CA; the client trusts ours.
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "", Tls("rogue_", ""));
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client(BulkClient::kClientIdleTimeout, "", Tls("", "ca.pem"));
  Tensor t = Pattern(1024);
  std::vector<char> got(t.TotalBytes());
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), got.data(), got.size(), nullptr,
                                absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "the server's certificate is not accepted")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--tls_ca")) << s;
  EXPECT_EQ((*server)->bytes_served(), 0u);
}

TEST_F(BulkTlsTest, WithACaTheServerAdmitsOnlyClientsItSigned) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "", Tls("", "ca.pem"));
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Pattern(1024);
  const uint64_t ticket = (*server)->Offer(t);
  std::vector<char> got(t.TotalBytes());
  // Trusts the server, but its own certificate is the rogue CA's.
  BulkClient rogue(BulkClient::kClientIdleTimeout, "",
                   *BulkTls::Create(File("rogue_node.pem"), File("rogue_node.key"), File("ca.pem")));
  absl::Status refused =
      rogue.Fetch("127.0.0.1", (*server)->port(), ticket, got.data(), got.size(), nullptr, absl::Seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "refused our certificate")) << refused;
  // Trusts the server, has no certificate at all.
  BulkClient anonymous(BulkClient::kClientIdleTimeout, "", *BulkTls::Create("", "", File("ca.pem")));
  refused = anonymous.Fetch("127.0.0.1", (*server)->port(), ticket, got.data(), got.size(), nullptr, absl::Seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  EXPECT_EQ((*server)->bytes_served(), 0u);
  // A member gets it.
  BulkClient member(BulkClient::kClientIdleTimeout, "", Tls("", "ca.pem"));
  absl::Status s = member.Fetch("127.0.0.1", (*server)->port(), ticket, got.data(), got.size(), nullptr);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(BulkTlsTest, FilesOpenSslCannotUseAreNamed) {
  absl::StatusOr<std::shared_ptr<const BulkTls>> t =
      BulkTls::Create(File("node.pem"), File("rogue_node.key"), File("ca.pem"));
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "private key does not belong to the certificate")) << t.status();
  t = BulkTls::Create("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", File("node.key"), "");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "certificate")) << t.status();
}

// A cluster whose servers and session use TLS: a 2 MiB variable on the ps
// reaches the worker over the ps's bulk port, encrypted.
TEST_F(BulkTlsTest, AClusterOverTlsMovesLargeTensorsOnItsBulkPort) {
  ASSERT_TRUE(SetUpTls(TlsFiles{*dir_ + "/node.pem", *dir_ + "/node.key", *dir_ + "/ca.pem"}).ok());
  struct Off {
    ~Off() { (void)SetUpTls(TlsFiles{}); }
  } off;
  ClusterSpec::JobMap jobs;
  jobs["ps"][0] = absl::StrCat("localhost:", subprocess::FreePort());
  jobs["worker"][0] = absl::StrCat("localhost:", subprocess::FreePort());
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJobs(jobs);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server* ps = nullptr;
  Server* worker = nullptr;
  for (auto& s : *servers) (s->task_name() == "/job:ps/replica:0/task:0" ? ps : worker) = s.get();
  ASSERT_GT(ps->bulk_port(), 0) << "TLS keeps the bulk port";
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  auto w = ops::MakeVariable(on_ps.WithOpName("w"), ops::Fill(on_ps, {512, 1024}, ops::Const(on_ps, 0.25f)));
  auto read = ops::Identity(root.WithDevice("/job:worker/task:0"), w);
  auto sum = ops::Sum(root.WithDevice("/job:worker/task:0"), read, {0, 1});
  Session sess(worker->target());
  auto r = sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
  ASSERT_TRUE(r.ok()) << r.status();
  BulkServer* bulk = ps->impl()->worker()->bulk_server();
  const uint64_t before = bulk->bytes_served();
  auto out = sess.Run({sum});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].scalar<float>(), 0.25f * 512 * 1024);
  EXPECT_EQ(bulk->bytes_served() - before, 512u * 1024 * sizeof(float));
}

}  // namespace
}  // namespace distflow
