#include "graph/shape_rules.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

void ExpectError(const absl::Status& s, absl::string_view text) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), text)) << s.message() << "\nwanted: " << text;
}

TEST(ShapeRules, ReshapeResolvesTheMinusOneOrKeepsItWhileTheSizeIsUnknown) {
  absl::StatusOr<std::vector<int64_t>> d = ResolveReshape({-1, 4}, 12, "[3,4]");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<int64_t>{3, 4}));
  d = ResolveReshape({-1, 4}, -1, "[?,4]");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<int64_t>{-1, 4}));
  d = ResolveReshape({2, 0}, 0, "[0]");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (std::vector<int64_t>{2, 0}));
}

TEST(ShapeRules, ReshapeRejectsWhatCannotMatchInTensorFlowsWords) {
  ExpectError(ResolveReshape({-1, -1}, 4, "[4]").status(), "only one input size may be -1, not both 0 and 1");
  ExpectError(ResolveReshape({2, -3}, -1, "?").status(), "size 1 must be non-negative, not -3");
  ExpectError(ResolveReshape({-1, 5}, 12, "[12]").status(),
              "Input to reshape is a tensor with 12 values, but the requested shape [-1,5] requires a multiple of 5");
  ExpectError(ResolveReshape({5, 2}, 12, "[3,4]").status(),
              "Cannot reshape a tensor of shape [3,4] with 12 elements to shape [5,2] with 10 elements");
  ExpectError(ResolveReshape({-1, 0}, 0, "[0]").status(), "cannot infer the missing input size for an empty tensor");
  ExpectError(ResolveReshape({-1, 0}, 3, "[3]").status(), "Cannot reshape a tensor with 3 elements to shape [-1,0]");
  const int64_t big = int64_t{1} << 40;
  ExpectError(ResolveReshape({big, big}, -1, "?").status(), "has too many elements");
}

TEST(ShapeRules, RangeCountsElementsAndRejectsBadArguments) {
  EXPECT_EQ(RangeSize(0, 10, 3).value(), 4);
  EXPECT_EQ(RangeSize(int64_t{10}, int64_t{0}, int64_t{-5}).value(), 2);
  EXPECT_EQ(RangeSize(0.f, 1.f, 0.25f).value(), 4);
  EXPECT_EQ(RangeSize(1.0, 1.0, 1.0).value(), 0);
  // The whole int32 span does not overflow.
  EXPECT_EQ(RangeSize(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 1).value(),
            int64_t{4294967295});
  ExpectError(RangeSize(0, 5, 0).status(), "Requires delta != 0");
  ExpectError(RangeSize(5.f, 0.f, 1.f).status(), "Requires start <= limit when delta > 0");
  ExpectError(RangeSize(0.0, 5.0, -1.0).status(), "Requires start >= limit when delta < 0");
  ExpectError(RangeSize(0.0, std::nan(""), 1.0).status(), "Range requires finite start, limit and delta");
  ExpectError(RangeSize(0.f, std::numeric_limits<float>::infinity(), 1.f).status(), "requires finite");
  ExpectError(RangeSize(0.0, 1e300, 1e-300).status(), "Range has too many elements");
  ExpectError(RangeSize(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int64_t{1}).status(),
              "Range has too many elements");
}

TEST(ShapeRules, ReductionAxesCountFromTheEndAndMustBeInRange) {
  EXPECT_EQ(ReductionMask({0, -1}, 3).value(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(ReductionMask({}, 2).value(), (std::vector<bool>{false, false}));
  EXPECT_EQ(ReductionMask({1, 1}, 2).value(), (std::vector<bool>{false, true}));
  ExpectError(ReductionMask({2}, 2).status(), "Invalid reduction dimension 2 for input with 2 dimensions");
  ExpectError(ReductionMask({-3}, 2).status(), "Invalid reduction dimension -3 for input with 2 dimensions");
}

}  // namespace
}  // namespace distflow
