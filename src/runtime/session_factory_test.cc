#include "runtime/session_factory.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// A session that remembers its target, to see which factory made it.
class TargetSession : public LocalSession {
 public:
  TargetSession(std::string target, SessionOptions o) : LocalSession(std::move(o)), target(std::move(target)) {}
  const std::string target;
};

TEST(SessionFactory, EmptyAndLocalTargetsAreInProcessOthersGoToTheLongestRegisteredPrefix) {
  absl::StatusOr<std::unique_ptr<SessionInterface>> s = NewSession("", SessionOptions());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(dynamic_cast<LocalSession*>(s->get()), nullptr);
  s = NewSession("local", SessionOptions());
  ASSERT_TRUE(s.ok()) << s.status();

  auto make = [](const std::string& tag) {
    return [tag](const std::string& target, SessionOptions o) -> absl::StatusOr<std::unique_ptr<SessionInterface>> {
      return std::unique_ptr<SessionInterface>(new TargetSession(tag + target, std::move(o)));
    };
  };
  RegisterSessionFactory("fake://", make("short:"));
  RegisterSessionFactory("fake://special/", make("long:"));
  s = NewSession("fake://host:1", SessionOptions());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(dynamic_cast<TargetSession*>(s->get())->target, "short:fake://host:1");
  s = NewSession("fake://special/x", SessionOptions());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(dynamic_cast<TargetSession*>(s->get())->target, "long:fake://special/x");

  s = NewSession("tcp://nowhere", SessionOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "Unknown session target 'tcp://nowhere'")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "\"fake://host:port\"")) << s.status();
}

TEST(SessionFactory, AGrpcTargetWithoutTheDistributedRuntimeLinkedSaysSo) {
  // runtime_test links no server: nothing registered grpc://.
  absl::StatusOr<std::unique_ptr<SessionInterface>> s = NewSession("grpc://127.0.0.1:1", SessionOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "distributed runtime")) << s.status();
}

}  // namespace
}  // namespace distflow
