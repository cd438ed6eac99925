// Tests of the float unary kernels of math_unary_kernels.cc against values
// NumPy gives (np.log1p, np.expm1, np.reciprocal, np.sin, np.cos,
// np.floor, np.ceil, np.round, which rounds half to even).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using math_test::RunUnary;
using math_test::V;

TEST(MathUnaryKernels, MatchNumpyValuesInDouble) {
  const std::vector<double> x = {-1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 1e-10};
  struct Case {
    const char* op;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"Floor", {-2, -1, 0, 0, 1, 2, 0}},
      {"Ceil", {-1, -0.0, 0, 1, 2, 3, 1}},
      {"Round", {-2, -0.0, 0, 0, 2, 2, 0}},
      {"Log1p",
       {std::nan(""), -0.6931471805599453, 0, 0.4054651081081644, 0.9162907318741551, 1.252762968495368,
        9.9999999995e-11}},
      {"Expm1",
       {-0.7768698398515702, -0.3934693402873666, 0, 0.6487212707001282, 3.4816890703380645, 11.182493960703473,
        1.00000000005e-10}},
      {"Reciprocal",
       {-0.6666666666666666, -2, std::numeric_limits<double>::infinity(), 2, 0.6666666666666666, 0.4, 1e10}},
      {"Sin",
       {-0.9974949866040544, -0.479425538604203, 0, 0.479425538604203, 0.9974949866040544, 0.5984721441039565, 1e-10}},
      {"Cos",
       {0.0707372016677029, 0.8775825618903728, 1, 0.8775825618903728, 0.0707372016677029, -0.8011436155469337, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary(c.op, V<double>(x)));
    auto got = out.flat<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(c.want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "x=" << x[i];
      } else if (std::isinf(c.want[i])) {
        EXPECT_EQ(got[i], c.want[i]) << "x=" << x[i];
      } else {
        EXPECT_NEAR(got[i], c.want[i], 1e-15 + 1e-14 * std::fabs(c.want[i])) << "x=" << x[i];
      }
    }
  }
}

TEST(MathUnaryKernels, FloatMatchesDoubleAndKeepsShape) {
  Tensor x = V<float>({-2.5f, -1.25f, 0.75f, 3.5f, 0.1f, 7.0f}, TensorShape({2, 3}));
  for (const char* op : {"Floor", "Ceil", "Round", "Log1p", "Expm1", "Reciprocal", "Sin", "Cos"}) {
    SCOPED_TRACE(op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary(op, x));
    ASSERT_EQ(out.shape(), TensorShape({2, 3}));
    ASSERT_EQ(out.dtype(), DT_FLOAT);
    for (int i = 0; i < 6; ++i) {
      DF_ASSERT_OK_AND_ASSIGN(Tensor ref, RunUnary(op, V<double>({static_cast<double>(x.flat<float>()[i])})));
      const double want = ref.flat<double>()[0];
      if (std::isnan(want)) continue;  // Log1p below -1
      EXPECT_NEAR(out.flat<float>()[i], want, 1e-6 * (1 + std::fabs(want)));
    }
  }
}

TEST(MathUnaryKernels, IsNanIsInfIsFinite) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const Tensor x = V<double>({1.5, nan, inf, -inf, 0});
  struct Case {
    const char* op;
    std::vector<bool> want;
  };
  for (const Case& c :
       {Case{"IsNan", {false, true, false, false, false}}, Case{"IsInf", {false, false, true, true, false}},
        Case{"IsFinite", {true, false, false, false, true}}}) {
    SCOPED_TRACE(c.op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary(c.op, x));
    ASSERT_EQ(out.dtype(), DT_BOOL);
    for (size_t i = 0; i < c.want.size(); ++i) EXPECT_EQ(out.flat<bool>()[i], c.want[i]) << i;
  }
}

TEST(MathUnaryKernels, RoundIsHalfToEven) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary("Round", V<float>({0.5f, 1.5f, 2.5f, -2.5f, 3.49f})));
  EXPECT_TENSOR_EQ(V<float>({0.0f, 2.0f, 2.0f, -2.0f, 3.0f}), out);
}

TEST(MathUnaryKernels, LargeInputsSplitAcrossThreadsGiveTheSameValues) {
  std::vector<float> v(10000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i) - 3.0f;
  DF_ASSERT_OK_AND_ASSIGN(Tensor one, RunUnary("Sin", V<float>(v)));
  DF_ASSERT_OK_AND_ASSIGN(Tensor four, RunUnary("Sin", V<float>(v), 4));
  EXPECT_TENSOR_EQ(one, four);
}

TEST(MathUnaryKernels, IntegersAreRejectedNamingTheOp) {
  absl::StatusOr<Tensor> r = RunUnary("Floor", V<int32_t>({1, 2}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("Floor"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace distflow
