#include "base/status_macros.h"

#include <memory>

#include "gtest/gtest.h"

namespace distflow {
namespace {

absl::Status FailIf(bool fail) { return fail ? absl::InvalidArgumentError("boom") : absl::OkStatus(); }

absl::Status Chain(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool fail) {
  if (fail) return absl::NotFoundError("no int");
  return std::make_unique<int>(7);
}

absl::StatusOr<int> UseInt(bool fail) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(fail));  // move-only type
  int existing = 0;
  ASSIGN_OR_RETURN(auto q, MakeInt(false));
  existing = *q;
  return *p + existing;
}

TEST(StatusMacros, ReturnIfErrorStopsOnError) {
  int reached = 0;
  absl::Status s = Chain(true, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacros, AssignOrReturnPropagatesAndMoves) {
  absl::StatusOr<int> bad = UseInt(true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bad.status().message(), "no int");
  absl::StatusOr<int> good = UseInt(false);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 14);
}

}  // namespace
}  // namespace distflow
