// TopKV2, InTopKV2 and LRN against NumPy's results (a stable argsort of the
// negated rows; the LRN formula evaluated in float64).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

Tensor Scalar(int32_t v) { return Tensor::FromVector<int32_t>({v}, TensorShape({})); }

TEST(TopKKernel, LargestFirstTiesToTheLowerIndex) {
  OpTest t("TopKV2");
  t.Input(Tensor::FromVector<float>({0.1f, 0.5f, 0.5f, 0.2f, 3, 1, 2, 0}, TensorShape({2, 4}))).Input(Scalar(2));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0.5f, 0.5f, 3, 2}, TensorShape({2, 2})), out[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<int32_t>({1, 2, 0, 2}, TensorShape({2, 2})), out[1]);
}

TEST(TopKKernel, KLargerThanTheRowIsAnError) {
  OpTest t("TopKV2");
  t.Input(Tensor::FromVector<float>({1, 2, 3})).Input(Scalar(4));
  absl::StatusOr<std::vector<Tensor>> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("k = 4"), std::string::npos) << r.status();
}

TEST(InTopKKernel, CountsStrictlyGreaterPredictions) {
  OpTest t("InTopKV2");
  const float inf = std::numeric_limits<float>::infinity();
  t.Input(Tensor::FromVector<float>({0.1f, 0.5f, 0.5f, 0.2f, 3, 1, 2, 0, inf, 1, 1, 1}, TensorShape({3, 4})))
      .Input(Tensor::FromVector<int64_t>({2, 1, 0}))
      .Input(Tensor::FromVector<int64_t>({1}, TensorShape({})));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  // Row 0: a tie with the maximum is in the top 1; row 1: class 1 is third;
  // row 2: a non-finite prediction never is.
  auto o = out[0].flat<bool>();
  EXPECT_TRUE(o[0]);
  EXPECT_FALSE(o[1]);
  EXPECT_FALSE(o[2]);
}

TEST(LrnKernel, MatchesTheFormula) {
  OpTest t("LRN");
  t.Input(Tensor::FromVector<double>({1, -2, 3, 0.5, 4, -1}, TensorShape({1, 1, 1, 6})));
  SetAttrInt(t.def(), "depth_radius", 2);
  SetAttrFloat(t.def(), "bias", 1.0);
  SetAttrFloat(t.def(), "alpha", 0.5);
  SetAttrFloat(t.def(), "beta", 0.75);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  const std::vector<double> want = {0.21022410381342865,  -0.4155874923550992, 0.3728176479597719,
                                    0.062136274659961986, 0.5489953284790225,  -0.18299930753120058};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(out[0].flat<double>()[i], want[i], 1e-14);
}

TEST(LrnKernel, RejectsInputsThatAreNot4D) {
  OpTest t("LRN");
  t.Input(Tensor::FromVector<float>({1, 2}));
  absl::StatusOr<std::vector<Tensor>> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("LRN input"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace distflow
