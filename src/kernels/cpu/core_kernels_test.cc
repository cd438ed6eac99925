#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

TEST(CoreKernels, IdentityForwardsWithoutCopy) {
  Tensor in = Tensor::FromVector<std::string>({"a", "b"});
  test::OpTest t("Identity");
  t.Input(in);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(in, out[0]);
}

TEST(CoreKernels, UnfedPlaceholderSaysWhatToFeed) {
  test::OpTest t("Placeholder");
  SetAttrType(t.def(), "dtype", DT_FLOAT);
  SetAttrShape(t.def(), "shape", PartialShape({-1, 784}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(
      out.status().message().find("You must feed a value for placeholder 'op' with dtype float32 and shape [?,784]"),
      std::string::npos)
      << out.status();
}

TEST(CoreKernels, ConstProducesItsValue) {
  Tensor v = Tensor::FromVector<int64_t>({4, 5, 6}, TensorShape({3, 1}));
  test::OpTest t("Const");
  SetAttrTensor(t.def(), "value", v);
  SetAttrType(t.def(), "dtype", DT_INT64);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(v, out[0]);
}

TEST(CoreKernels, PlaceholderWithDefaultRejectsIncompatibleDefault) {
  test::OpTest t("PlaceholderWithDefault");
  t.Input(Tensor::FromVector<float>({1, 2, 3}));
  SetAttrType(t.def(), "dtype", DT_FLOAT);
  SetAttrShape(t.def(), "shape", PartialShape({2}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("does not fit shape [2]"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace distflow
