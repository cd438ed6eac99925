#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

absl::StatusOr<Tensor> RunBinary(const std::string& op, const Tensor& a, const Tensor& b, int threads = 0) {
  OpTest t(op);
  t.Input(a).Input(b);
  if (threads > 0) t.IntraOpThreads(threads);
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  if (!out.ok()) return out.status();
  return (*out)[0];
}

absl::StatusOr<Tensor> RunUnary(const std::string& op, const Tensor& a, int threads = 0) {
  OpTest t(op);
  t.Input(a);
  if (threads > 0) t.IntraOpThreads(threads);
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  if (!out.ok()) return out.status();
  return (*out)[0];
}

template <typename T>
Tensor V(std::vector<T> v, TensorShape s) {
  return Tensor::FromVector<T>(v, s);
}
template <typename T>
Tensor V(std::vector<T> v) {
  return Tensor::FromVector<T>(v);
}
Tensor B(std::vector<bool> v, TensorShape s) {
  Tensor t(DT_BOOL, s);
  for (size_t i = 0; i < v.size(); ++i) t.flat<bool>()[i] = v[i];
  return t;
}
Tensor B(std::vector<bool> v) { return B(v, TensorShape({static_cast<int64_t>(v.size())})); }

#define EXPECT_ERROR_CONTAINS(status_or, text)                                                  \
  do {                                                                                          \
    auto df_r_ = (status_or);                                                                   \
    ASSERT_FALSE(df_r_.ok());                                                                   \
    EXPECT_NE(std::string(df_r_.status().message()).find(text), std::string::npos) << df_r_.status(); \
  } while (0)

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
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Add", V<float>({1, 2, 3, 4}, {2, 2}), V<float>({10, 20, 30, 40}, {2, 2})));
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
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Add", V<float>({1, 2, 3}, {3, 1}), V<float>({10, 20, 30, 40}, {1, 4})));
  EXPECT_TENSOR_EQ(V<float>({11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}, {3, 4}), out);
}

TEST(MathKernels, MulBroadcastsVectorAcrossRows) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Mul", V<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}), V<int64_t>({1, 10, 100})));
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
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("Add", V<int32_t>(a, {2, 3, 2}), V<int32_t>({100, 200, 300, 400}, {2, 1, 2})));
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
      {"Add", {9, 11, 15, 5}},
      {"Sub", {3, 7, 9, 1}},
      {"Mul", {18, 18, 36, 6}},
      {"Maximum", {6, 9, 12, 3}},
      {"Minimum", {3, 2, 3, 2}},
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
  for (auto [a, b] : {std::pair{V<int32_t>({1, 2}), V<int32_t>({1, 0})}, std::pair{V<int64_t>({1, 2}), V<int64_t>({0, 1})}}) {
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
      {"Equal", {false, true, false, false, false, false}},
      {"NotEqual", {true, false, true, true, true, true}},
      {"Less", {true, false, false, false, false, false}},
      {"LessEqual", {true, true, false, false, false, false}},
      {"Greater", {false, false, true, true, true, true}},
      {"GreaterEqual", {false, true, true, true, true, true}},
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

TEST(MathKernels, LessRejectsBool) {
  EXPECT_FALSE(RunBinary("Less", B({true}), B({false})).ok());
}

TEST(MathKernels, LogicalAndBroadcasts) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunBinary("LogicalAnd", B({true, false}, {2, 1}), B({true, false, true}, {1, 3})));
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

// ---------------------------------------------------------------------------
// AddN

TEST(MathKernels, AddNWithOneInputForwardsIt) {
  Tensor a = V<float>({1, 2, 3});
  OpTest t("AddN");
  t.Input(a);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(a, out[0]);
}

TEST(MathKernels, AddNSumsThreeInputs) {
  OpTest t("AddN");
  t.Input(V<int64_t>({1, 2, 3, 4}, {2, 2})).Input(V<int64_t>({10, 20, 30, 40}, {2, 2})).Input(V<int64_t>({100, 200, 300, 400}, {2, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<int64_t>({111, 222, 333, 444}, {2, 2}), out[0]);
}

TEST(MathKernels, AddNWorksForEveryDtype) {
  auto check = [](auto tag) {
    using T = typename decltype(tag)::type;
    SCOPED_TRACE(DataTypeName(DataTypeToEnum<T>::value));
    OpTest t("AddN");
    t.Input(V<T>({1, 2})).Input(V<T>({3, 4}));
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_TENSOR_EQ(V<T>({4, 6}), out[0]);
  };
  check(TypeTag<float>{});
  check(TypeTag<double>{});
  check(TypeTag<int32_t>{});
  check(TypeTag<int64_t>{});
  check(TypeTag<uint8_t>{});
}

TEST(MathKernels, AddNRejectsMismatchedShapesNamingThem) {
  OpTest t("AddN");
  t.Input(V<float>({1, 2})).Input(V<float>({1, 2, 3}));
  auto out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("[3]"), std::string::npos) << out.status();
  EXPECT_NE(std::string(out.status().message()).find("[2]"), std::string::npos) << out.status();
}

TEST(MathKernels, AddNOfEmptyTensors) {
  OpTest t("AddN");
  t.Input(V<float>({}, {0, 2})).Input(V<float>({}, {0, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_EQ(out[0].shape(), TensorShape({0, 2}));
}

// ---------------------------------------------------------------------------
// Cast

absl::StatusOr<Tensor> RunCast(const Tensor& x, DataType dst) {
  OpTest t("Cast");
  t.Input(x);
  SetAttrType(t.def(), "DstT", dst);
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  if (!out.ok()) return out.status();
  return (*out)[0];
}

// The values {0, 1, 2, 100} (bool: {false, true, true, true}) as each dtype.
Tensor Sample(DataType dt) {
  return VisitDataType(dt, [](auto tag) -> Tensor {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return B({false, true, true, true}, {2, 2});
    } else if constexpr (std::is_same_v<T, std::string>) {
      return Tensor();
    } else {
      return V<T>({0, 1, 2, 100}, {2, 2});
    }
  });
}

TEST(MathKernels, CastBetweenAllPairs) {
  const std::vector<DataType> types = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL};
  for (DataType src : types) {
    for (DataType dst : types) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(src), " -> ", DataTypeName(dst)));
      DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunCast(Sample(src), dst));
      Tensor expect = Sample(dst);
      if (src == DT_BOOL && dst != DT_BOOL) {
        // true becomes 1.
        expect = VisitDataType(dst, [](auto tag) -> Tensor {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
            return Tensor();
          } else {
            return V<T>({0, 1, 1, 1}, {2, 2});
          }
        });
      }
      EXPECT_TENSOR_EQ(expect, out);
    }
  }
}

TEST(MathKernels, CastFloatToIntTruncatesTowardZero) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunCast(V<float>({1.9f, -1.9f, 0.5f, -0.5f}), DT_INT32));
  EXPECT_TENSOR_EQ(V<int32_t>({1, -1, 0, 0}), out);
}

TEST(MathKernels, CastFloatToIntSaturatesAndMapsNaNToZero) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunCast(V<double>({1e20, -1e20, std::nan(""), 300, -3}), DT_INT32));
  EXPECT_TENSOR_EQ(V<int32_t>({std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 0, 300, -3}),
                   out);
  DF_ASSERT_OK_AND_ASSIGN(Tensor u8, RunCast(V<float>({300, -3, 7.5f}), DT_UINT8));
  EXPECT_TENSOR_EQ(V<uint8_t>({255, 0, 7}), u8);
  DF_ASSERT_OK_AND_ASSIGN(Tensor i64, RunCast(V<float>({1e30f}), DT_INT64));
  EXPECT_TENSOR_EQ(V<int64_t>({std::numeric_limits<int64_t>::max()}), i64);
}

TEST(MathKernels, CastIntegerNarrowingWraps) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunCast(V<int32_t>({256, 257, -1}), DT_UINT8));
  EXPECT_TENSOR_EQ(V<uint8_t>({0, 1, 255}), out);
}

TEST(MathKernels, CastToBoolIsNonZero) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunCast(V<float>({0.0f, -0.0f, 0.25f, -3, std::nanf("")}), DT_BOOL));
  EXPECT_TENSOR_EQ(B({false, false, true, true, true}), out);
}

TEST(MathKernels, CastRejectsString) {
  EXPECT_FALSE(RunCast(Tensor::FromVector<std::string>({"a"}), DT_FLOAT).ok());
  EXPECT_FALSE(RunCast(V<float>({1}), DT_STRING).ok());
}

// ---------------------------------------------------------------------------
// Select

absl::StatusOr<Tensor> RunSelect(const Tensor& c, const Tensor& t, const Tensor& e, int threads = 0) {
  OpTest op("Select");
  op.Input(c).Input(t).Input(e);
  if (threads > 0) op.IntraOpThreads(threads);
  absl::StatusOr<std::vector<Tensor>> out = op.Run();
  if (!out.ok()) return out.status();
  return (*out)[0];
}

TEST(MathKernels, SelectElementwise) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunSelect(B({true, false, false, true}, {2, 2}), V<float>({1, 2, 3, 4}, {2, 2}),
                                                V<float>({10, 20, 30, 40}, {2, 2})));
  EXPECT_TENSOR_EQ(V<float>({1, 20, 30, 4}, {2, 2}), out);
}

TEST(MathKernels, SelectRowsWithVectorCondition) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunSelect(B({false, true, false}), V<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}),
                                                V<int32_t>({10, 20, 30, 40, 50, 60}, {3, 2})));
  EXPECT_TENSOR_EQ(V<int32_t>({10, 20, 3, 4, 50, 60}, {3, 2}), out);
}

TEST(MathKernels, SelectRowsOfRank3) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunSelect(B({true, false}), V<double>({1, 2, 3, 4}, {2, 1, 2}),
                                                V<double>({5, 6, 7, 8}, {2, 1, 2})));
  EXPECT_TENSOR_EQ(V<double>({1, 2, 7, 8}, {2, 1, 2}), out);
}

TEST(MathKernels, SelectScalarCondition) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunSelect(B({false}, TensorShape({})), V<int64_t>({1, 2}), V<int64_t>({3, 4})));
  EXPECT_TENSOR_EQ(V<int64_t>({3, 4}), out);
}

TEST(MathKernels, SelectWorksForStringsAndBools) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor s, RunSelect(B({true, false}), Tensor::FromVector<std::string>({"a", "b"}),
                                              Tensor::FromVector<std::string>({"c", "d"})));
  EXPECT_TENSOR_EQ(Tensor::FromVector<std::string>({"a", "d"}), s);
  DF_ASSERT_OK_AND_ASSIGN(Tensor b, RunSelect(B({true, false}), B({true, true}), B({false, false})));
  EXPECT_TENSOR_EQ(B({true, false}), b);
}

TEST(MathKernels, SelectShapeMismatchNamesShapes) {
  auto te = RunSelect(B({true, false}), V<float>({1, 2}), V<float>({1, 2, 3}));
  ASSERT_FALSE(te.ok());
  EXPECT_EQ(te.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(te.status().message()).find("[2] vs [3]"), std::string::npos) << te.status();

  auto rows = RunSelect(B({true, false, true}), V<float>({1, 2, 3, 4}, {2, 2}), V<float>({1, 2, 3, 4}, {2, 2}));
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(rows.status().message()).find("[3]"), std::string::npos) << rows.status();
  EXPECT_NE(std::string(rows.status().message()).find("[2,2]"), std::string::npos) << rows.status();

  auto mat = RunSelect(B({true, false}, {1, 2}), V<float>({1, 2, 3, 4}, {2, 2}), V<float>({1, 2, 3, 4}, {2, 2}));
  ASSERT_FALSE(mat.ok());
  EXPECT_NE(std::string(mat.status().message()).find("[1,2]"), std::string::npos) << mat.status();
}

TEST(MathKernels, SelectOfEmptyTensors) {
  DF_ASSERT_OK_AND_ASSIGN(Tensor out, RunSelect(B({}, {0}), V<float>({}, {0, 3}), V<float>({}, {0, 3})));
  EXPECT_EQ(out.shape(), TensorShape({0, 3}));
}

// ---------------------------------------------------------------------------
// Multi-threaded results equal single-threaded ones.

TEST(MathKernels, ParallelResultsEqualSingleThreaded) {
  constexpr int64_t kN = 1 << 20;
  std::vector<float> a(kN), b(kN);
  std::vector<bool> c(kN);
  for (int64_t i = 0; i < kN; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.01f + 0.5f;
    b[static_cast<size_t>(i)] = static_cast<float>((i * 7) % 333) * 0.1f - 5.0f;
    c[static_cast<size_t>(i)] = (i % 3) == 0;
  }
  Tensor ta = V<float>(a, {1024, 1024});
  Tensor tb = V<float>(b, {1024, 1024});
  Tensor row = V<float>(std::vector<float>(b.begin(), b.begin() + 1024), {1024});
  Tensor col = V<float>(std::vector<float>(b.begin(), b.begin() + 1024), {1024, 1});
  for (const char* op : {"Add", "Mul", "Div", "Maximum", "Less", "Pow"}) {
    for (const Tensor* rhs : {&tb, &row, &col}) {
      SCOPED_TRACE(absl::StrCat(op, " rhs ", rhs->shape().DebugString()));
      DF_ASSERT_OK_AND_ASSIGN(Tensor one, RunBinary(op, ta, *rhs));
      DF_ASSERT_OK_AND_ASSIGN(Tensor two, RunBinary(op, ta, *rhs, 2));
      EXPECT_TENSOR_EQ(one, two);
    }
  }
  // Spot-check the threaded broadcast result against a direct computation.
  DF_ASSERT_OK_AND_ASSIGN(Tensor bc, RunBinary("Sub", ta, col, 2));
  for (int64_t i : {int64_t{0}, int64_t{1023}, int64_t{524287}, kN - 1}) {
    EXPECT_EQ(bc.flat<float>()[static_cast<size_t>(i)], a[static_cast<size_t>(i)] - b[static_cast<size_t>(i / 1024)]);
  }
  for (const char* op : {"Exp", "Log", "Sqrt", "Neg", "Square"}) {
    SCOPED_TRACE(op);
    DF_ASSERT_OK_AND_ASSIGN(Tensor one, RunUnary(op, ta));
    DF_ASSERT_OK_AND_ASSIGN(Tensor two, RunUnary(op, ta, 2));
    EXPECT_TENSOR_EQ(one, two);
  }
  {
    DF_ASSERT_OK_AND_ASSIGN(Tensor one, RunCast(ta, DT_INT32));
    OpTest t("Cast");
    t.Input(ta).IntraOpThreads(2);
    SetAttrType(t.def(), "DstT", DT_INT32);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> two, t.Run());
    EXPECT_TENSOR_EQ(one, two[0]);
  }
  {
    OpTest t1("AddN"), t2("AddN");
    t1.Input(ta).Input(tb).Input(ta);
    t2.Input(ta).Input(tb).Input(ta).IntraOpThreads(2);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> one, t1.Run());
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> two, t2.Run());
    EXPECT_TENSOR_EQ(one[0], two[0]);
    EXPECT_EQ(two[0].flat<float>()[12345], a[12345] + b[12345] + a[12345]);
  }
  {
    Tensor cond = B(c, {1024, 1024});
    DF_ASSERT_OK_AND_ASSIGN(Tensor one, RunSelect(cond, ta, tb));
    DF_ASSERT_OK_AND_ASSIGN(Tensor two, RunSelect(cond, ta, tb, 2));
    EXPECT_TENSOR_EQ(one, two);
    EXPECT_EQ(two.flat<float>()[3], a[3]);
    EXPECT_EQ(two.flat<float>()[4], b[4]);
    Tensor rows = B(std::vector<bool>(c.begin(), c.begin() + 1024));
    DF_ASSERT_OK_AND_ASSIGN(Tensor r1, RunSelect(rows, ta, tb));
    DF_ASSERT_OK_AND_ASSIGN(Tensor r2, RunSelect(rows, ta, tb, 2));
    EXPECT_TENSOR_EQ(r1, r2);
  }
}

}  // namespace
}  // namespace distflow
