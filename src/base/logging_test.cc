#include "base/logging.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(Logging, LinesCarryPrefixAndLocation) {
  SetLogPrefix("/job:ps/task:0");
  testing::internal::CaptureStderr();
  LOG(INFO) << "hello " << 42;
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out[0], 'I');
  EXPECT_NE(out.find("/job:ps/task:0"), std::string::npos) << out;
  EXPECT_NE(out.find("logging_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("] hello 42\n"), std::string::npos) << out;
  SetLogPrefix("");
}

TEST(Logging, SeverityFilterDropsLowerLevels) {
  LogSeverity old = MinLogSeverity();
  SetMinLogSeverity(LogSeverity::kWarning);
  int evaluated = 0;
  testing::internal::CaptureStderr();
  LOG(INFO) << "hidden" << ++evaluated;
  LOG(WARNING) << "shown";
  std::string out = testing::internal::GetCapturedStderr();
  SetMinLogSeverity(old);
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find("shown"), std::string::npos);
  EXPECT_EQ(evaluated, 0) << "a filtered LOG must not evaluate its arguments";
}

TEST(LoggingDeathTest, CheckFailureAbortsWithMessage) {
  int x = 3;
  EXPECT_DEATH(CHECK(x == 4) << "x was " << x, "Check failed: x == 4 x was 3");
}

}  // namespace
}  // namespace distflow
