#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;
using math_test::B;
using math_test::RunBinary;
using math_test::RunUnary;
using math_test::V;

// ---------------------------------------------------------------------------
// BroadcastPlan

TEST(BroadcastPlan, SameShapeCollapsesToOneDimension) {
  DF_ASSERT_OK_AND_ASSIGN(BroadcastPlan p, BroadcastPlan::Make(TensorShape({2, 3, 4}), TensorShape({2, 3, 4})));
  EXPECT_EQ(p.output_shape, TensorShape({2, 3, 4}));
  ASSERT_EQ(p.dims.size(), 1u);
  EXPECT_EQ(p.dims[0], 24);
  EXPECT_TRUE(p.same_shape);
}

TEST(BroadcastPlan, ColumnAgainstRowKeepsTwoDimensions) {
  DF_ASSERT_OK_AND_ASSIGN(BroadcastPlan p, BroadcastPlan::Make(TensorShape({3, 1}), TensorShape({1, 4})));
  EXPECT_EQ(p.output_shape, TensorShape({3, 4}));
  ASSERT_EQ(p.dims.size(), 2u);
  EXPECT_EQ(p.a_strides[0], 1);
  EXPECT_EQ(p.a_strides[1], 0);
  EXPECT_EQ(p.b_strides[0], 0);
  EXPECT_EQ(p.b_strides[1], 1);
}

TEST(BroadcastPlan, IncompatibleShapesNameBoth) {
  auto p = BroadcastPlan::Make(TensorShape({2, 3}), TensorShape({4}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "Incompatible shapes: [2,3] vs [4]");
}

TEST(BroadcastPlan, RunsCoverAnArbitraryRangeInOrder) {
  DF_ASSERT_OK_AND_ASSIGN(BroadcastPlan p, BroadcastPlan::Make(TensorShape({3, 1, 5}), TensorShape({4, 1})));
  // Reference: explicit index arithmetic over [3,4,5].
  std::vector<int64_t> expect_a, expect_b;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) {
        expect_a.push_back(i * 5 + k);
        expect_b.push_back(j);
      }
  for (int64_t begin : {0, 3, 7, 21}) {
    for (int64_t end : {begin + 1, int64_t{33}, int64_t{60}}) {
      if (end <= begin || end > 60) continue;
      std::vector<int64_t> got_a, got_b;
      int64_t next = begin;
      ForEachBroadcastRun(p, begin, end, [&](int64_t o, int64_t ia, int64_t ib, int64_t n, bool sa, bool sb) {
        EXPECT_EQ(o, next);
        next += n;
        for (int64_t j = 0; j < n; ++j) {
          got_a.push_back(ia + (sa ? j : 0));
          got_b.push_back(ib + (sb ? j : 0));
        }
      });
      EXPECT_EQ(next, end);
      EXPECT_EQ(got_a, std::vector<int64_t>(expect_a.begin() + begin, expect_a.begin() + end));
      EXPECT_EQ(got_b, std::vector<int64_t>(expect_b.begin() + begin, expect_b.begin() + end));
    }
  }
}

// ---------------------------------------------------------------------------
// Binary arithmetic

TEST(MathKernels, AddSameShapeFloat) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out,
                          RunBinary("Add", V<float>({1, 2, 3, 4}, {2, 2}), V<float>({10, 20, 30, 40}, {2, 2})));
  EXPECT_TENSOR_EQ(V<float>({11, 22, 33, 44}, {2, 2}), out);
}

TEST(MathKernels, AddScalarToTensorEitherSide) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor l, RunBinary("Add", Tensor::Scalar<int32_t>(5), V<int32_t>({1, 2, 3})));
  EXPECT_TENSOR_EQ(V<int32_t>({6, 7, 8}), l);
  DF_ASSERT_OK_AND_ASSIGN(Tensor r, RunBinary("Sub", V<int32_t>({1, 2, 3}), Tensor::Scalar<int32_t>(5)));
  EXPECT_TENSOR_EQ(V<int32_t>({-4, -3, -2}), r);
}

TEST(MathKernels, AddScalarToScalar) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Add", Tensor::Scalar<double>(1.5), Tensor::Scalar<double>(2.25)));
  EXPECT_TENSOR_EQ(Tensor::Scalar<double>(3.75), out);
}

TEST(MathKernels, AddBroadcastsColumnAgainstRow) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out,
                          RunBinary("Add", V<float>({1, 2, 3}, {3, 1}), V<float>({10, 20, 30, 40}, {1, 4})));
  EXPECT_TENSOR_EQ(V<float>({11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}, {3, 4}), out);
}

TEST(MathKernels, MulBroadcastsVectorAcrossRows) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out,
                          RunBinary("Mul", V<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}), V<int64_t>({1, 10, 100})));
  EXPECT_TENSOR_EQ(V<int64_t>({1, 20, 300, 4, 50, 600}, {2, 3}), out);
}

TEST(MathKernels, SubBroadcastsAcrossRankMismatch) {
  // [2,1,3] - [4,1] -> [2,4,3]
  std::vector<double> a = {1, 2, 3, 4, 5, 6};
  std::vector<double> b = {10, 20, 30, 40};
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Sub", V<double>(a, {2, 1, 3}), V<double>(b, {4, 1})));
  std::vector<double> expect;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) expect.push_back(a[static_cast<size_t>(i * 3 + k)] - b[static_cast<size_t>(j)]);
  EXPECT_TENSOR_EQ(V<double>(expect, {2, 4, 3}), out);
}

TEST(MathKernels, BroadcastMiddleDimension) {
  // [2,3,2] + [2,1,2]: b broadcast along the middle dimension only.
  std::vector<int32_t> a(12);
  for (int i = 0; i < 12; ++i) a[static_cast<size_t>(i)] = i;
  DF_ASSERT_OK_AND_ASSIGN(Tensor out,
                          RunBinary("Add", V<int32_t>(a, {2, 3, 2}), V<int32_t>({100, 200, 300, 400}, {2, 1, 2})));
  EXPECT_TENSOR_EQ(V<int32_t>({100, 201, 102, 203, 104, 205, 306, 407, 308, 409, 310, 411}, {2, 3, 2}), out);
}

TEST(MathKernels, IncompatibleShapesFailAtBuildTimeNamingShapes) {
  auto out = RunBinary("Add", V<float>({1, 2, 3, 4, 5, 6}, {2, 3}), V<float>({1, 2, 3, 4}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(out.status().message()).find("[2,3]"), std::string::npos) << out.status();
  EXPECT_NE(std::string(out.status().message()).find("[4]"), std::string::npos) << out.status();
  EXPECT_NE(std::string(out.status().message()).find("Incompatible shapes"), std::string::npos) << out.status();
}

TEST(MathKernels, EmptyTensorsBroadcastToEmpty) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor a, RunBinary("Add", V<float>({}, {0, 3}), V<float>({1, 2, 3})));
  EXPECT_EQ(a.shape(), TensorShape({0, 3}));
  DF_ASSERT_OK_AND_ASSIGN(Tensor b, RunBinary("Mul", V<float>({}, {2, 0}), Tensor::Scalar<float>(2)));
  EXPECT_EQ(b.shape(), TensorShape({2, 0}));
  DF_ASSERT_OK_AND_ASSIGN(Tensor c, RunBinary("Less", V<int32_t>({}, {0}), V<int32_t>({}, {0})));
  EXPECT_EQ(c.shape(), TensorShape({0}));
  EXPECT_EQ(c.dtype(), DT_BOOL);
  // A 1 broadcasts against 0.
  DF_ASSERT_OK_AND_ASSIGN(Tensor d, RunBinary("Add", V<int64_t>({}, {3, 0}), V<int64_t>({7, 8, 9}, {3, 1})));
  EXPECT_EQ(d.shape(), TensorShape({3, 0}));
  DF_ASSERT_OK_AND_ASSIGN(Tensor e, RunUnary("Exp", V<double>({}, {0, 5})));
  EXPECT_EQ(e.shape(), TensorShape({0, 5}));
}

template <typename T>
void CheckArithmeticForType() {
  SCOPED_TRACE(DataTypeName(DataTypeToEnum<T>::value));
  Tensor a = V<T>({6, 9, 12, 3}, {2, 2});
  Tensor b = V<T>({3, 2}, {1, 2});
  struct Case {
    const char* op;
    std::vector<T> expect;
  };
  std::vector<Case> cases = {
      {"Add", {9, 11, 15, 5}},    {"Sub", {3, 7, 9, 1}},     {"Mul", {18, 18, 36, 6}},
      {"Maximum", {6, 9, 12, 3}}, {"Minimum", {3, 2, 3, 2}},
  };
  if constexpr (!std::is_same_v<T, uint8_t>) {
    cases.push_back({"Div", {2, std::is_integral_v<T> ? T(4) : T(4.5), 4, std::is_integral_v<T> ? T(1) : T(1.5)}});
    cases.push_back({"Pow", {216, 81, 1728, 9}});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary(c.op, a, b));
    EXPECT_TENSOR_EQ(V<T>(c.expect, {2, 2}), out);
  }
}

TEST(MathKernels, ArithmeticWorksForEveryDtype) {
  CheckArithmeticForType<float>();
  CheckArithmeticForType<double>();
  CheckArithmeticForType<int32_t>();
  CheckArithmeticForType<int64_t>();
  CheckArithmeticForType<uint8_t>();
}

TEST(MathKernels, IntegerDivTruncatesTowardZero) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Div", V<int32_t>({7, -7, 7, -7}), V<int32_t>({2, 2, -2, -2})));
  EXPECT_TENSOR_EQ(V<int32_t>({3, -3, -3, 3}), out);
}

TEST(MathKernels, IntegerDivByZeroIsInvalidArgument) {
  for (auto [a, b] :
       {std::pair{V<int32_t>({1, 2}), V<int32_t>({1, 0})}, std::pair{V<int64_t>({1, 2}), V<int64_t>({0, 1})}}) {
    auto out = RunBinary("Div", a, b);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(out.status().message()).find("division by zero"), std::string::npos) << out.status();
  }
}

TEST(MathKernels, IntegerDivOfMinByMinusOneWraps) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Div", V<int32_t>({mn, 6}), Tensor::Scalar<int32_t>(-1)));
  EXPECT_TENSOR_EQ(V<int32_t>({mn, -6}), out);
}

TEST(MathKernels, FloatDivByZeroGivesInfinity) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Div", V<float>({1, -1}), V<float>({0, 0})));
  EXPECT_EQ(out.flat<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out.flat<float>()[1], -std::numeric_limits<float>::infinity());
}

TEST(MathKernels, PowMatchesStdPowForFloats) {
  std::vector<double> a = {2, 0.5, 9, 1.5, 3};
  std::vector<double> b = {10, -2, 0.5, 3.3, 0};
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Pow", V<double>(a), V<double>(b)));
  std::vector<double> expect;
  for (size_t i = 0; i < a.size(); ++i) expect.push_back(std::pow(a[i], b[i]));
  EXPECT_TENSOR_NEAR(V<double>(expect), out, 1e-12);
}

TEST(MathKernels, IntegerPowRejectsNegativeExponent) {
  EXPECT_ERROR_CONTAINS(RunBinary("Pow", V<int32_t>({2}), V<int32_t>({-1})), "negative integer powers");
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Pow", V<int64_t>({-2, 0, 7}), V<int64_t>({3, 0, 1})));
  EXPECT_TENSOR_EQ(V<int64_t>({-8, 1, 7}), out);
}

TEST(MathKernels, MaximumAndMinimumPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  DF_ASSERT_OK_AND_ASSIGN(Tensor mx, RunBinary("Maximum", V<float>({nan, 1, 5}), V<float>({1, nan, 2})));
  EXPECT_TRUE(std::isnan(mx.flat<float>()[0]));
  EXPECT_TRUE(std::isnan(mx.flat<float>()[1]));
  EXPECT_EQ(mx.flat<float>()[2], 5);
  DF_ASSERT_OK_AND_ASSIGN(Tensor mn, RunBinary("Minimum", V<float>({nan, 1, 5}), V<float>({1, nan, 2})));
  EXPECT_TRUE(std::isnan(mn.flat<float>()[0]));
  EXPECT_TRUE(std::isnan(mn.flat<float>()[1]));
  EXPECT_EQ(mn.flat<float>()[2], 2);
}

TEST(MathKernels, IntegerAddWrapsOnOverflow) {
  const int32_t mx = std::numeric_limits<int32_t>::max();
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Add", V<int32_t>({mx}), V<int32_t>({1})));
  EXPECT_TENSOR_EQ(V<int32_t>({std::numeric_limits<int32_t>::min()}), out);
  DF_ASSERT_OK_AND_ASSIGN(Tensor u, RunBinary("Add", V<uint8_t>({250}), V<uint8_t>({10})));
  EXPECT_TENSOR_EQ(V<uint8_t>({4}), u);
}

TEST(MathKernels, MismatchedDtypesFailNamingThem) {
  auto out = RunBinary("Add", V<float>({1}), V<int32_t>({1}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("int32"), std::string::npos) << out.status();
}

TEST(MathKernels, UnsupportedDtypeIsRejected) {
  auto out = RunBinary("Div", V<uint8_t>({1}), V<uint8_t>({1}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("uint8"), std::string::npos) << out.status();
}

// ---------------------------------------------------------------------------
// Comparisons and logic

template <typename T>
void CheckComparisonsForType() {
  SCOPED_TRACE(DataTypeName(DataTypeToEnum<T>::value));
  Tensor a = V<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = V<T>({2, 2, 2});
  struct Case {
    const char* op;
    std::vector<bool> expect;
  };
  std::vector<Case> cases = {
      {"Equal", {false, true, false, false, false, false}}, {"NotEqual", {true, false, true, true, true, true}},
      {"Less", {true, false, false, false, false, false}},  {"LessEqual", {true, true, false, false, false, false}},
      {"Greater", {false, false, true, true, true, true}},  {"GreaterEqual", {false, true, true, true, true, true}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary(c.op, a, b));
    EXPECT_TENSOR_EQ(B(c.expect, {2, 3}), out);
  }
}

TEST(MathKernels, ComparisonsBroadcastForEveryDtype) {
  CheckComparisonsForType<float>();
  CheckComparisonsForType<double>();
  CheckComparisonsForType<int32_t>();
  CheckComparisonsForType<int64_t>();
  CheckComparisonsForType<uint8_t>();
}

TEST(MathKernels, EqualAndNotEqualAcceptBool) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor eq, RunBinary("Equal", B({true, false, true}), B({true, true, false})));
  EXPECT_TENSOR_EQ(B({true, false, false}), eq);
  DF_ASSERT_OK_AND_ASSIGN(Tensor ne, RunBinary("NotEqual", B({true, false, true}), B({true}, TensorShape({}))));
  EXPECT_TENSOR_EQ(B({false, true, false}), ne);
}

TEST(MathKernels, EqualTreatsNaNAsUnequal) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  DF_ASSERT_OK_AND_ASSIGN(Tensor eq, RunBinary("Equal", V<double>({nan, 1}), V<double>({nan, 1})));
  EXPECT_TENSOR_EQ(B({false, true}), eq);
}

TEST(MathKernels, LessRejectsBool) { EXPECT_FALSE(RunBinary("Less", B({true}), B({false})).ok()); }

TEST(MathKernels, LogicalAndBroadcasts) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out,
                          RunBinary("LogicalAnd", B({true, false}, {2, 1}), B({true, false, true}, {1, 3})));
  EXPECT_TENSOR_EQ(B({true, false, true, false, false, false}, {2, 3}), out);
  DF_ASSERT_OK_AND_ASSIGN(Tensor orr, RunBinary("LogicalOr", B({true, false}), B({false}, TensorShape({}))));
  EXPECT_TENSOR_EQ(B({true, false}), orr);
}

TEST(MathKernels, LogicalNotInverts) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary("LogicalNot", B({true, false, false}, {3, 1})));
  EXPECT_TENSOR_EQ(B({false, true, true}, {3, 1}), out);
}

// ---------------------------------------------------------------------------
// Unary

template <typename T>
void CheckIntegralUnaryForType() {
  SCOPED_TRACE(DataTypeName(DataTypeToEnum<T>::value));
  Tensor x = V<T>({-3, 0, 2, 5}, {2, 2});
  DF_ASSERT_OK_AND_ASSIGN(Tensor neg, RunUnary("Neg", x));
  EXPECT_TENSOR_EQ(V<T>({3, 0, -2, -5}, {2, 2}), neg);
  DF_ASSERT_OK_AND_ASSIGN(Tensor sq, RunUnary("Square", x));
  EXPECT_TENSOR_EQ(V<T>({9, 0, 4, 25}, {2, 2}), sq);
  DF_ASSERT_OK_AND_ASSIGN(Tensor ab, RunUnary("Abs", x));
  EXPECT_TENSOR_EQ(V<T>({3, 0, 2, 5}, {2, 2}), ab);
  DF_ASSERT_OK_AND_ASSIGN(Tensor sg, RunUnary("Sign", x));
  EXPECT_TENSOR_EQ(V<T>({-1, 0, 1, 1}, {2, 2}), sg);
}

TEST(MathKernels, NegSquareAbsSignForEveryDtype) {
  CheckIntegralUnaryForType<float>();
  CheckIntegralUnaryForType<double>();
  CheckIntegralUnaryForType<int32_t>();
  CheckIntegralUnaryForType<int64_t>();
}

template <typename T>
void CheckTranscendentalForType() {
  SCOPED_TRACE(DataTypeName(DataTypeToEnum<T>::value));
  const std::vector<double> in = {0.01, 0.5, 1, 2, 10, 123.25};
  std::vector<T> x;
  for (double v : in) x.push_back(static_cast<T>(v));
  struct Case {
    const char* op;
    std::function<double(double)> ref;
  };
  std::vector<Case> cases = {
      {"Sqrt", [](double v) { return std::sqrt(v); }},
      {"Rsqrt", [](double v) { return 1.0 / std::sqrt(v); }},
      {"Exp", [](double v) { return std::exp(v); }},
      {"Log", [](double v) { return std::log(v); }},
  };
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary(c.op, V<T>(x, {2, 3})));
    std::vector<T> expect;
    for (T v : x) expect.push_back(static_cast<T>(c.ref(static_cast<double>(v))));
    EXPECT_TRUE(test::TensorNear(V<T>(expect, {2, 3}), out, 0, tol));
  }
}

TEST(MathKernels, SqrtRsqrtExpLogMatchFloat64Reference) {
  CheckTranscendentalForType<float>();
  CheckTranscendentalForType<double>();
}

TEST(MathKernels, TranscendentalEdgeCases) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor lg, RunUnary("Log", V<float>({0, -1})));
  EXPECT_EQ(lg.flat<float>()[0], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(lg.flat<float>()[1]));
  DF_ASSERT_OK_AND_ASSIGN(Tensor sq, RunUnary("Sqrt", V<double>({-4, 0})));
  EXPECT_TRUE(std::isnan(sq.flat<double>()[0]));
  EXPECT_EQ(sq.flat<double>()[1], 0);
  DF_ASSERT_OK_AND_ASSIGN(Tensor rs, RunUnary("Rsqrt", V<float>({0})));
  EXPECT_EQ(rs.flat<float>()[0], std::numeric_limits<float>::infinity());
}

TEST(MathKernels, SqrtRejectsIntegers) {
  auto out = RunUnary("Sqrt", V<int32_t>({4}));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("int32"), std::string::npos) << out.status();
}

TEST(MathKernels, SignOfNaNIsNaN) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunUnary("Sign", V<float>({std::numeric_limits<float>::quiet_NaN(), -0.5f})));
  EXPECT_TRUE(std::isnan(out.flat<float>()[0]));
  EXPECT_EQ(out.flat<float>()[1], -1);
}

}  // namespace
}  // namespace distflow
