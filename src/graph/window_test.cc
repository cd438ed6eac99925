#include "graph/window.h"

#include "absl/strings/match.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

proto::NodeDef Pool(std::vector<int64_t> ksize, std::vector<int64_t> strides, const std::string& padding) {
  proto::NodeDef n;
  n.set_name("pool");
  n.set_op("MaxPool");
  SetAttrIntList(&n, "ksize", ksize);
  SetAttrIntList(&n, "strides", strides);
  SetAttrString(&n, "padding", padding);
  return n;
}

TEST(Window, SameKeepsTheSizeOverTheStrideAndPutsTheOddPaddingAfter) {
  absl::StatusOr<WindowDim> d = ComputeWindow(28, 5, 1, true, "filter");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 28);
  EXPECT_EQ(d->pad_before, 2);
  EXPECT_EQ(d->pad_after, 2);
  d = ComputeWindow(5, 2, 2, true, "pooling");  // out 3, one padded column, after
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 3);
  EXPECT_EQ(d->pad_before, 0);
  EXPECT_EQ(d->pad_after, 1);
}

TEST(Window, ValidDropsThePartialWindowAndRejectsAWindowLargerThanTheInput) {
  absl::StatusOr<WindowDim> d = ComputeWindow(28, 2, 2, false, "pooling");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 14);
  d = ComputeWindow(7, 3, 2, false, "filter");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 3);
  d = ComputeWindow(2, 3, 1, false, "pooling");
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::StrContains(d.status().message(), "pooling window (3) is larger than the input (2)")) << d.status();
}

TEST(Window, ReadsValidAttrs) {
  absl::StatusOr<WindowAttrs> a = ReadWindowAttrs(Pool({1, 3, 2, 1}, {1, 2, 1, 1}, "SAME"), true);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kh, 3);
  EXPECT_EQ(a->kw, 2);
  EXPECT_EQ(a->sh, 2);
  EXPECT_EQ(a->sw, 1);
  EXPECT_TRUE(a->same);
}

TEST(Window, RejectsBadAttrsQuotingThem) {
  struct Case {
    proto::NodeDef node;
    const char* expect;
  };
  proto::NodeDef nchw = Pool({1, 2, 2, 1}, {1, 1, 1, 1}, "VALID");
  SetAttrString(&nchw, "data_format", "NCHW");
  const Case cases[] = {
      {Pool({1, 2, 2, 1}, {1, 1, 1}, "VALID"), "strides must have 4 elements (NHWC), got [1,1,1]"},
      {Pool({1, 2, 2, 1}, {2, 1, 1, 1}, "VALID"), "strides[0] = strides[3] = 1"},
      {Pool({1, 2, 2, 1}, {1, 0, 1, 1}, "VALID"), "strides must be positive, got [1,0,1,1]"},
      {Pool({2, 2, 2, 1}, {1, 1, 1, 1}, "VALID"), "pooling is not supported across the batch or depth"},
      {Pool({1, 2, -1, 1}, {1, 1, 1, 1}, "VALID"), "ksize must be positive"},
      {Pool({1, 2, 2, 1}, {1, 1, 1, 1}, "FULL"), "padding must be 'SAME' or 'VALID', got 'FULL'"},
      {nchw, "data_format 'NCHW' is not supported"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<WindowAttrs> a = ReadWindowAttrs(c.node, true);
    ASSERT_FALSE(a.ok()) << c.expect;
    EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << a.status();
    EXPECT_TRUE(absl::StrContains(a.status().message(), c.expect)) << a.status() << " vs " << c.expect;
  }
}

}  // namespace
}  // namespace distflow
