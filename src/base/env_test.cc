#include "base/env.h"

#include <cstdlib>

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
