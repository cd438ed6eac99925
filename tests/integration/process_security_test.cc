// process_test: a cluster token keeps outsiders off a task's ports
// (rpc/auth.h), and mutual TLS admits only clients with a certificate from
// the cluster's CA, with real servers, clients and launched clusters.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "process_test_util.h"

namespace distflow {
namespace process_test {
namespace {

TEST(Security, AServerWithATokenRefusesClientsWithoutIt) {
  const int port = FreePort();
  Cluster c;
  c.procs_.reserve(2);
  Proc& server = c.Start({absl::StrCat("--cluster_spec=local|localhost:", port), "--job_name=local", "--task_index=0"},
                         {"DISTFLOW_AUTH_TOKEN=correct-horse"});
  const std::string target = absl::StrCat("grpc://localhost:", port);
  Proc none = Spawn({HELLO_BIN, target});
  EXPECT_NE(Wait(none, 60), 0) << Output(none);
  EXPECT_NE(Output(none).find("requires the cluster's token"), std::string::npos) << Output(none);
  EXPECT_NE(Output(none).find("DISTFLOW_AUTH_TOKEN"), std::string::npos) << Output(none);
  Proc wrong = Spawn({HELLO_BIN, target}, {"DISTFLOW_AUTH_TOKEN=battery-staple"});
  EXPECT_NE(Wait(wrong, 60), 0) << Output(wrong);
  EXPECT_NE(Output(wrong).find("is not the cluster's"), std::string::npos) << Output(wrong);
  Proc member = Spawn({HELLO_BIN, target}, {"DISTFLOW_AUTH_TOKEN=correct-horse"});
  EXPECT_EQ(Wait(member, 60), 0) << Output(member);
  EXPECT_NE(Output(member).find("Hello, distributed TensorFlow!"), std::string::npos) << Output(member);
  kill(server.pid, SIGTERM);
  EXPECT_EQ(Wait(server, 20), 0) << Output(server);
}

TEST(Security, ALaunchedClusterTrainsWithATokenFile) {
  const std::string dir = NewLogdir("token");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  const std::string token_file = dir + "/token";
  { std::ofstream(token_file) << "s3cret-from-a-file\n"; }
  // The ps (distflow-server) gets the token from the environment, the
  // workers from the file: the same secret, two ways. The CNN's weights
  // cross over the bulk ports, which check it too.
  Proc launch =
      Spawn({DISTFLOW_LAUNCH_BIN, "--ps", "1", "--workers", "1", "--", MNIST_DISTRIBUTED_BIN, "--train_steps=30",
             "--progress=false", "--auth_token_file=" + token_file, "--wait_for_workers_secs=30"},
            {"DISTFLOW_AUTH_TOKEN=s3cret-from-a-file"});
  EXPECT_EQ(Wait(launch, 240), 0) << Output(launch);
  EXPECT_NE(Output(launch).find("Test-Accuracy"), std::string::npos) << Output(launch);
}

TEST(Security, BadTokensExitTwoAndAnOpenServerWarns) {
  Proc missing = Spawn({DISTFLOW_SERVER_BIN, "--cluster_spec=local|localhost:2222", "--job_name=local",
                        "--task_index=0", "--auth_token_file=/nonexistent/token"});
  EXPECT_EQ(Wait(missing, 30), 2) << Output(missing);
  EXPECT_NE(Output(missing).find("cannot read the token file '/nonexistent/token'"), std::string::npos)
      << Output(missing);
  Proc binary =
      Spawn({DISTFLOW_SERVER_BIN, "--cluster_spec=local|localhost:2222", "--job_name=local", "--task_index=0"},
            {"DISTFLOW_AUTH_TOKEN=tab\there"});
  EXPECT_EQ(Wait(binary, 30), 2) << Output(binary);
  EXPECT_NE(Output(binary).find("DISTFLOW_AUTH_TOKEN holds a byte that is not printable"), std::string::npos)
      << Output(binary);

  // Listening on every address without a token: a loud warning.
  const int port = FreePort();
  Cluster c;
  c.procs_.reserve(1);
  Proc& open = c.Start({absl::StrCat("--cluster_spec=local|0.0.0.0:", port), "--job_name=local", "--task_index=0"});
  ASSERT_TRUE(WaitForOutput(open, "Started server", 30)) << Output(open);
  EXPECT_NE(Output(open).find("without a cluster token: anyone who can reach this port"), std::string::npos)
      << Output(open);
  kill(open.pid, SIGTERM);
  EXPECT_EQ(Wait(open, 20), 0) << Output(open);
}

std::vector<std::string> TlsEnv(const std::string& dir, const std::string& prefix) {
  return {"DISTFLOW_TLS_CERT=" + dir + "/" + prefix + "node.pem", "DISTFLOW_TLS_KEY=" + dir + "/" + prefix + "node.key",
          "DISTFLOW_TLS_CA=" + dir + "/" + prefix + "ca.pem"};
}

TEST(Security, MutualTlsAdmitsOnlyClientsWithACertificateFromTheCa) {
  const std::string dir = NewLogdir("tls");
  ASSERT_TRUE(MakeCertificates(dir, "")) << "openssl failed";
  ASSERT_TRUE(MakeCertificates(dir, "rogue_")) << "openssl failed";
  const int port = FreePort();
  Cluster c;
  c.procs_.reserve(2);
  Proc& server =
      c.Start({absl::StrCat("--cluster_spec=local|localhost:", port), "--job_name=local", "--task_index=0",
               "--tls_cert=" + dir + "/node.pem", "--tls_key=" + dir + "/node.key", "--tls_ca=" + dir + "/ca.pem"});
  ASSERT_TRUE(WaitForOutput(server, "Started server", 30)) << Output(server);
  EXPECT_NE(Output(server).find("; bulk tensor transfer on port "), std::string::npos) << Output(server);
  const std::string target = absl::StrCat("grpc://localhost:", port);
  // A member of the cluster (certificate from the CA) is served.
  Proc member = Spawn({HELLO_BIN, target}, TlsEnv(dir, ""));
  EXPECT_EQ(Wait(member, 60), 0) << Output(member);
  EXPECT_NE(Output(member).find("Hello, distributed TensorFlow!"), std::string::npos) << Output(member);
  // A plain-text client, and one whose certificate another CA signed, are not.
  // Both are told so at once, not after the wait for a server to start.
  Proc plain = Spawn({HELLO_BIN, target});
  EXPECT_NE(Wait(plain, 20), 0) << Output(plain);
  EXPECT_NE(Output(plain).find("it probably requires TLS, which this client does not use"), std::string::npos)
      << Output(plain);
  std::vector<std::string> rogue_env = TlsEnv(dir, "rogue_");
  rogue_env[2] = "DISTFLOW_TLS_CA=" + dir + "/ca.pem";  // trusts the server, but is not trusted back
  Proc rogue = Spawn({HELLO_BIN, target}, rogue_env);
  EXPECT_NE(Wait(rogue, 20), 0) << Output(rogue);
  EXPECT_EQ(Output(rogue).find("Hello, distributed TensorFlow!"), std::string::npos) << Output(rogue);
  EXPECT_NE(Output(rogue).find("TLS"), std::string::npos) << Output(rogue);
  kill(server.pid, SIGTERM);
  EXPECT_EQ(Wait(server, 20), 0) << Output(server);

  // A TLS client of a plain server is told the handshake failed.
  const int plain_port = FreePort();
  Proc& open =
      c.Start({absl::StrCat("--cluster_spec=local|localhost:", plain_port), "--job_name=local", "--task_index=0"});
  ASSERT_TRUE(WaitForOutput(open, "Started server", 30)) << Output(open);
  Proc tls_client = Spawn({HELLO_BIN, absl::StrCat("grpc://localhost:", plain_port)}, TlsEnv(dir, ""));
  EXPECT_NE(Wait(tls_client, 20), 0) << Output(tls_client);
  EXPECT_NE(Output(tls_client).find("The TLS handshake with localhost:"), std::string::npos) << Output(tls_client);
  kill(open.pid, SIGTERM);
  EXPECT_EQ(Wait(open, 20), 0) << Output(open);
}

TEST(Security, TheBooksProgramTrainsOverTls) {
  const std::string dir = NewLogdir("tls_book");
  ASSERT_TRUE(MakeCertificates(dir, "")) << "openssl failed";
  BookCluster c("tls_book_logs");
  c.extra = {"--tls_cert=" + dir + "/node.pem", "--tls_key=" + dir + "/node.key", "--tls_ca=" + dir + "/ca.pem"};
  auto [ps, w1, chief] = c.StartPsAndTwoWorkers(300);
  EXPECT_EQ(Wait(chief, 120), 0) << Output(chief);
  EXPECT_NE(Output(chief).find("Test-Accuracy"), std::string::npos) << Output(chief);
  EXPECT_EQ(Wait(w1, 60), 0) << Output(w1);
  EXPECT_EQ(Wait(ps, 60), 0) << Output(ps);
  EXPECT_NE(Output(ps).find("; TLS"), std::string::npos) << Output(ps);
}

TEST(Security, BadTlsFilesExitTwoNamingThem) {
  const std::string dir = NewLogdir("tls_bad");
  ASSERT_TRUE(MakeCertificates(dir, "")) << "openssl failed";
  const std::vector<std::string> base = {DISTFLOW_SERVER_BIN, "--cluster_spec=local|localhost:2222", "--job_name=local",
                                         "--task_index=0"};
  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> env;
    std::string says;
  };
  for (const Case& k : std::vector<Case>{
           {{"--tls_cert=" + dir + "/node.pem"}, {}, "--tls_cert is given without its private key"},
           {{"--tls_key=/nonexistent/key.pem", "--tls_cert=" + dir + "/node.pem"},
            {},
            "--tls_key=/nonexistent/key.pem: cannot read the private key file"},
           {{"--tls_ca=" + dir + "/ext.cnf"}, {}, "not a PEM file"},
           {{}, {"DISTFLOW_TLS_CA=" + dir + "/ca.pem"}, "no certificate to serve with"},
       }) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), k.flags.begin(), k.flags.end());
    Proc p = Spawn(argv, k.env);
    const int code = Wait(p, 30);
    EXPECT_NE(Output(p).find(k.says), std::string::npos) << Output(p);
    EXPECT_EQ(code, 2) << Output(p);
  }
}

}  // namespace
}  // namespace process_test
}  // namespace distflow
