// Math kernel tests, continued: AddN, Cast, Select, and multi-threaded
// results against single-threaded ones.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/status_macros.h"
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
  t.Input(V<int64_t>({1, 2, 3, 4}, {2, 2}))
      .Input(V<int64_t>({10, 20, 30, 40}, {2, 2}))
      .Input(V<int64_t>({100, 200, 300, 400}, {2, 2}));
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
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
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
  ASSIGN_OR_RETURN(std::vector<Tensor> out, op.Run());
  return out[0];
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
  DF_ASSERT_OK_AND_ASSIGN(
      Tensor out, RunSelect(B({true, false}), V<double>({1, 2, 3, 4}, {2, 1, 2}), V<double>({5, 6, 7, 8}, {2, 1, 2})));
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
