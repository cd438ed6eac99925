#include "distflow/tensor_shape.h"

#include <limits>

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(TensorShape, ScalarHasOneElement) {
  TensorShape s;
  EXPECT_EQ(s.dims(), 0);
  EXPECT_EQ(s.num_elements(), 1);
  EXPECT_TRUE(s.IsScalar());
  EXPECT_EQ(s.DebugString(), "[]");
}

TEST(TensorShape, ZeroSizedDimensionGivesZeroElements) {
  TensorShape s({3, 0, 5});
  EXPECT_EQ(s.num_elements(), 0);
  EXPECT_EQ(s.DebugString(), "[3,0,5]");
}

TEST(TensorShape, FromDimsRejectsNegative) {
  auto s = TensorShape::FromDims({2, -1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("negative"), std::string::npos);
}

TEST(TensorShape, FromDimsRejectsOverflow) {
  int64_t big = int64_t{1} << 40;
  auto s = TensorShape::FromDims({big, big});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("int64"), std::string::npos);
  // Zero anywhere makes the product representable again.
  EXPECT_TRUE(TensorShape::FromDims({big, big, 0}).ok());
}

TEST(TensorShape, FromDimsRejectsHugeRank) {
  std::vector<int64_t> dims(TensorShape::kMaxRank + 1, 1);
  EXPECT_FALSE(TensorShape::FromDims(dims).ok());
  dims.pop_back();
  EXPECT_TRUE(TensorShape::FromDims(dims).ok());
}

TEST(TensorShape, AddDimKeepsShapeOnOverflow) {
  TensorShape s({int64_t{1} << 62});
  EXPECT_FALSE(s.AddDim(4).ok());
  EXPECT_EQ(s.dims(), 1);
  EXPECT_EQ(s.num_elements(), int64_t{1} << 62);
  EXPECT_TRUE(s.AddDim(1).ok());
  EXPECT_EQ(s.dims(), 2);
}

TEST(TensorShape, SetAndRemoveDim) {
  TensorShape s({2, 3, 4});
  ASSERT_TRUE(s.SetDim(1, 5).ok());
  EXPECT_EQ(s.num_elements(), 40);
  EXPECT_FALSE(s.SetDim(7, 1).ok());
  s.RemoveDim(0);
  EXPECT_EQ(s, TensorShape({5, 4}));
}

TEST(TensorShape, MultiplyWithoutOverflowDetects) {
  int64_t out;
  EXPECT_TRUE(MultiplyWithoutOverflow(3, 4, &out));
  EXPECT_EQ(out, 12);
  EXPECT_FALSE(MultiplyWithoutOverflow(std::numeric_limits<int64_t>::max(), 2, &out));
  EXPECT_FALSE(MultiplyWithoutOverflow(-1, 2, &out));
}

}  // namespace
}  // namespace distflow
