#include "base/env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

#include "base/ports.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/distflow_env_test_XXXXXX";
  char* d = ::mkdtemp(tmpl);
  return d ? d : "/tmp";
}

TEST(Env, WriteAtomicallyThenRead) {
  Env* env = Env::Default();
  std::string dir = TempDir();
  std::string path = dir + "/a/b/file";
  ASSERT_TRUE(env->CreateDir(dir + "/a/b").ok());
  ASSERT_TRUE(env->WriteFileAtomically(path, std::string("x\0y", 3)).ok());
  auto got = env->ReadFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("x\0y", 3));
  ASSERT_TRUE(env->WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*env->ReadFile(path), "second");
  auto listing = env->ListDir(dir + "/a/b");
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->size(), 1u) << "the temporary file must be gone after rename";
  EXPECT_TRUE(env->DeleteFile(path).ok());
  EXPECT_FALSE(env->FileExists(path));
}

TEST(Env, MissingFileIsNotFoundNamingThePath) {
  auto got = Env::Default()->ReadFile("/nonexistent/distflow/file");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("/nonexistent/distflow/file"), std::string::npos);
}

TEST(Env, CreateDirOverAFileFails) {
  Env* env = Env::Default();
  std::string dir = TempDir();
  ASSERT_TRUE(env->WriteFileAtomically(dir + "/f", "x").ok());
  EXPECT_FALSE(env->CreateDir(dir + "/f").ok());
}

TEST(Env, PickUnusedPortGivesAValidPort) {
  auto port = Env::Default()->PickUnusedPort();
  ASSERT_TRUE(port.ok());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

// A port picked for a server named in advance lies outside the range the
// kernel gives to port-0 binds and outgoing connections, so no other process
// can be handed it before the server binds; and it is free on every address.
TEST(Ports, PickedPortsAvoidTheKernelsEphemeralRange) {
  auto [lo, hi] = EphemeralPortRange();
  ASSERT_LE(lo, hi);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<int> port = PickUnusedTcpPort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_TRUE(*port < lo || *port > hi) << *port << " is in " << lo << "-" << hi;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(*port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << "port " << *port << ": " << errno;
    ::close(fd);
  }
}

TEST(Ports, OneProcessIsNeverGivenThePortTwice) {
  std::set<int> seen;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<int> port = PickUnusedTcpPort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " given twice";
  }
}

TEST(Ports, AHostThatIsNotAnIpv4AddressIsNamed) {
  absl::StatusOr<int> port = PickUnusedTcpPort("not-an-address");
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(port.status().message().find("not-an-address"), std::string::npos) << port.status();
}

// A wrapper lets a test replace one call: here, a clock that never moves.
class FrozenClock : public EnvWrapper {
 public:
  FrozenClock() : EnvWrapper(Env::Default()) {}
  int64_t NowMicros() override { return 42; }
};

TEST(Env, WrapperOverridesOneCallAndForwardsTheRest) {
  FrozenClock env;
  EXPECT_EQ(env.NowMicros(), 42);
  EXPECT_FALSE(env.FileExists("/nonexistent/distflow"));
}

}  // namespace
}  // namespace distflow
