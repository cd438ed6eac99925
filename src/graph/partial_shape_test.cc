#include "distflow/partial_shape.h"

#include "gtest/gtest.h"
#include "proto/tensor.pb.h"

namespace distflow {
namespace {

TEST(PartialShape, UnknownIsCompatibleWithEverything) {
  PartialShape u;
  EXPECT_TRUE(u.unknown_rank());
  EXPECT_TRUE(u.IsCompatibleWith(TensorShape({3, 4})));
  EXPECT_EQ(u.DebugString(), "<unknown>");
}

TEST(PartialShape, UnknownDimsMatchAnySize) {
  PartialShape s({-1, 784});
  EXPECT_EQ(s.DebugString(), "[?,784]");
  EXPECT_TRUE(s.IsCompatibleWith(TensorShape({50, 784})));
  EXPECT_FALSE(s.IsCompatibleWith(TensorShape({50, 783})));
  EXPECT_FALSE(s.IsCompatibleWith(TensorShape({784})));
  EXPECT_FALSE(s.IsFullyDefined());
  EXPECT_EQ(s.num_elements(), -1);
}

TEST(PartialShape, MergeRefinesOrNamesBoth) {
  auto m = PartialShape({-1, 3}).Merge(PartialShape({2, -1}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, PartialShape({2, 3}));
  auto bad = PartialShape({2, 3}).Merge(PartialShape({2, 4}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2,3] and [2,4]"), std::string::npos);
}

TEST(PartialShape, ProtoRoundTripAndValidation) {
  proto::TensorShapeProto p;
  PartialShape({-1, 5}).ToProto(&p);
  auto back = PartialShape::FromProto(p);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, PartialShape({-1, 5}));
  p.add_dim(-7);
  EXPECT_FALSE(PartialShape::FromProto(p).ok());
  proto::TensorShapeProto unknown;
  unknown.set_unknown_rank(true);
  EXPECT_TRUE(PartialShape::FromProto(unknown)->unknown_rank());
}

}  // namespace
}  // namespace distflow
