#include "base/final_status.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(FinalStatus, TheMarkTravelsWithCopiesAndKeepsCodeAndMessage) {
  const absl::Status plain = absl::UnavailableError("the server has stopped");
  EXPECT_FALSE(IsFinal(plain));
  const absl::Status marked = MarkFinal(plain);
  const absl::Status copy = marked;
  EXPECT_TRUE(IsFinal(copy));
  EXPECT_TRUE(absl::IsUnavailable(copy));
  EXPECT_EQ(copy.message(), "the server has stopped");
}

TEST(FinalStatus, AnOkStatusIsNeverFinal) {
  EXPECT_TRUE(MarkFinal(absl::OkStatus()).ok());
  EXPECT_FALSE(IsFinal(MarkFinal(absl::OkStatus())));
}

TEST(FinalStatus, WithMessageKeepsTheMarkOnlyWhereItWas) {
  const absl::Status reworded = WithMessage(MarkFinal(absl::UnavailableError("gone")), "step: gone");
  EXPECT_TRUE(IsFinal(reworded));
  EXPECT_TRUE(absl::IsUnavailable(reworded));
  EXPECT_EQ(reworded.message(), "step: gone");
  EXPECT_FALSE(IsFinal(WithMessage(absl::AbortedError("restarted"), "step: restarted")));
}

}  // namespace
}  // namespace distflow
