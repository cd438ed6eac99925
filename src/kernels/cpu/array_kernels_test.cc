#include <string>
#include <vector>

#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::OpTest;

template <typename T>
Tensor V(const std::vector<T>& v, std::initializer_list<int64_t> dims) {
  return Tensor::FromVector<T>(v, TensorShape(dims));
}
template <typename T>
Tensor V(const std::vector<T>& v) {
  return Tensor::FromVector<T>(v);
}
Tensor I32(const std::vector<int32_t>& v) { return Tensor::FromVector<int32_t>(v); }
Tensor I64(const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(v); }

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& out, const std::string& needle) {
  ASSERT_FALSE(out.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_NE(std::string(out.status().message()).find(needle), std::string::npos) << out.status();
}

// ----------------------------------------------------------------- Reshape

TEST(ArrayKernels, ReshapeInfersMinusOneAndSharesBuffer) {
  Tensor in = V<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  OpTest t("Reshape");
  t.Input(in).Input(I32({3, -1}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({1, 2, 3, 4, 5, 6}, {3, 2}), out[0]);
  EXPECT_TRUE(out[0].SharesBufferWith(in));
}

TEST(ArrayKernels, ReshapeInt64ShapeAndStrings) {
  OpTest t("Reshape");
  t.Input(V<std::string>({"a", "b", "c", "d"})).Input(I64({2, 1, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"a", "b", "c", "d"}, {2, 1, 2}), out[0]);
}

TEST(ArrayKernels, ReshapeToScalarAndEmpty) {
  OpTest t("Reshape");
  t.Input(V<int32_t>({7}, {1, 1})).Input(I32({}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(7), out[0]);

  OpTest e("Reshape");
  e.Input(V<double>({}, {0, 4})).Input(I32({2, 0, 3}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out2, e.Run());
  EXPECT_EQ(out2[0].shape(), TensorShape({2, 0, 3}));
}

TEST(ArrayKernels, ReshapeElementCountMismatchNamesBothShapes) {
  OpTest t("Reshape");
  t.Input(V<float>({1, 2, 3, 4, 5, 6}, {2, 3})).Input(I32({4, 2}));
  ExpectError(t.Run(), "Cannot reshape a tensor of shape [2,3] with 6 elements to shape [4,2] with 8 elements");
}

TEST(ArrayKernels, ReshapeRejectsTwoMinusOnesAndIndivisible) {
  OpTest t("Reshape");
  t.Input(V<float>({1, 2, 3, 4, 5, 6}, {6})).Input(I32({-1, -1}));
  ExpectError(t.Run(), "only one input size may be -1");
  OpTest u("Reshape");
  u.Input(V<float>({1, 2, 3, 4, 5, 6}, {6})).Input(I32({4, -1}));
  ExpectError(u.Run(), "requires a multiple of 4");
  OpTest w("Reshape");
  w.Input(V<float>({1, 2}, {2})).Input(I32({-2, -1}));
  ExpectError(w.Run(), "must be non-negative");
}

// ------------------------------------------------------ Shape, Size, Rank

TEST(ArrayKernels, ShapeSizeRankDescribeTheInput) {
  Tensor in = V<std::string>({"a", "b", "c", "d", "e", "f"}, {2, 1, 3});
  OpTest s("Shape");
  s.Input(in);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> so, s.Run());
  EXPECT_TENSOR_EQ(I32({2, 1, 3}), so[0]);

  OpTest s64("Shape");
  s64.Input(in);
  SetAttrType(s64.def(), "out_type", DT_INT64);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> s64o, s64.Run());
  EXPECT_TENSOR_EQ(I64({2, 1, 3}), s64o[0]);

  OpTest z("Size");
  z.Input(in);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> zo, z.Run());
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(6), zo[0]);

  OpTest z64("Size");
  z64.Input(V<float>({}, {3, 0}));
  SetAttrType(z64.def(), "out_type", DT_INT64);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> z64o, z64.Run());
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(0), z64o[0]);

  OpTest r("Rank");
  r.Input(in);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> ro, r.Run());
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(3), ro[0]);

  OpTest sc("Shape");
  sc.Input(Tensor::Scalar<float>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> sco, sc.Run());
  EXPECT_TENSOR_EQ(I32({}), sco[0]);
}

// ------------------------------------------------- Fill, ZerosLike, OnesLike

TEST(ArrayKernels, FillRepeatsTheValue) {
  OpTest t("Fill");
  t.Input(I32({2, 3})).Input(Tensor::Scalar<float>(1.5f));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}, {2, 3}), out[0]);

  OpTest s("Fill");
  s.Input(I64({2})).Input(Tensor::Scalar<std::string>("x"));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> so, s.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"x", "x"}), so[0]);

  OpTest i("Fill");
  i.Input(I32({0, 5})).Input(Tensor::Scalar<int32_t>(3));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> io, i.Run());
  EXPECT_EQ(io[0].shape(), TensorShape({0, 5}));
}

TEST(ArrayKernels, FillRejectsNegativeAndHugeDims) {
  OpTest t("Fill");
  t.Input(I32({2, -1})).Input(Tensor::Scalar<float>(0));
  ExpectError(t.Run(), "non-negative");
  OpTest h("Fill");
  h.Input(I64({int64_t{1} << 40, int64_t{1} << 40})).Input(Tensor::Scalar<float>(0));
  auto out = h.Run();
  EXPECT_FALSE(out.ok());
  OpTest v("Fill");
  v.Input(I32({2})).Input(V<float>({1, 2}));
  ExpectError(v.Run(), "must have rank 0");
}

TEST(ArrayKernels, ZerosLikeAndOnesLike) {
  OpTest z("ZerosLike");
  z.Input(V<int32_t>({4, 5, 6}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> zo, z.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({0, 0, 0}), zo[0]);
  OpTest o("OnesLike");
  o.Input(V<double>({4, 5, 6, 7}, {2, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> oo, o.Run());
  EXPECT_TENSOR_EQ(V<double>({1, 1, 1, 1}, {2, 2}), oo[0]);
  OpTest f("OnesLike");
  f.Input(V<float>({}, {0, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> fo, f.Run());
  EXPECT_EQ(fo[0].shape(), TensorShape({0, 2}));
}

// ------------------------------------------------------------------ Concat

TEST(ArrayKernels, ConcatAlongInnerAxis) {
  OpTest t("Concat");
  t.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(V<float>({5, 6}, {2, 1})).Input(Tensor::Scalar<int32_t>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({1, 2, 5, 3, 4, 6}, {2, 3}), out[0]);
}

TEST(ArrayKernels, ConcatNegativeAxisInt64AndStrings) {
  OpTest t("Concat");
  t.Input(V<std::string>({"a", "b"}, {1, 2}))
      .Input(V<std::string>({"c", "d", "e", "f"}, {2, 2}))
      .Input(Tensor::Scalar<int64_t>(-2));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"a", "b", "c", "d", "e", "f"}, {3, 2}), out[0]);

  OpTest i("Concat");
  i.Input(V<int64_t>({1, 2})).Input(V<int64_t>({})).Input(V<int64_t>({3})).Input(Tensor::Scalar<int32_t>(0));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> io, i.Run());
  EXPECT_TENSOR_EQ(V<int64_t>({1, 2, 3}), io[0]);
}

TEST(ArrayKernels, ConcatShapeMismatchNamesShapesAndIndex) {
  OpTest t("Concat");
  t.Input(V<int32_t>({1, 2, 3, 4}, {2, 2})).Input(V<int32_t>({1, 2, 3}, {1, 3})).Input(Tensor::Scalar<int32_t>(0));
  ExpectError(t.Run(), "Dimension 1 in both shapes must be equal: shape[0] = [2,2] vs. shape[1] = [1,3]");
  OpTest a("Concat");
  a.Input(V<int32_t>({1, 2})).Input(V<int32_t>({3})).Input(Tensor::Scalar<int32_t>(1));
  ExpectError(a.Run(), "range [-1, 1), but got 1");
}

// ------------------------------------------------------------------- Slice

TEST(ArrayKernels, SliceWithMinusOneSize) {
  OpTest t("Slice");
  t.Input(V<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4})).Input(I32({1, 1})).Input(I32({-1, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({5, 6, 9, 10}, {2, 2}), out[0]);
}

TEST(ArrayKernels, SliceAlongFirstDimIsZeroCopy) {
  Tensor in = V<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  OpTest t("Slice");
  t.Input(in).Input(I64({1, 0})).Input(I64({2, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({2, 3, 4, 5}, {2, 2}), out[0]);
  EXPECT_TRUE(out[0].SharesBufferWith(in));
}

TEST(ArrayKernels, SliceRank3StringsAndEmpty) {
  std::vector<std::string> s;
  for (int i = 0; i < 24; ++i) s.push_back(std::to_string(i));
  OpTest t("Slice");
  t.Input(Tensor::FromVector<std::string>(s, TensorShape({2, 3, 4}))).Input(I32({1, 1, 0})).Input(I32({1, 2, -1}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"16", "17", "18", "19", "20", "21", "22", "23"}, {1, 2, 4}), out[0]);

  OpTest e("Slice");
  e.Input(V<double>({1, 2, 3, 4}, {2, 2})).Input(I32({0, 2})).Input(I32({2, 0}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> eo, e.Run());
  EXPECT_EQ(eo[0].shape(), TensorShape({2, 0}));
}

TEST(ArrayKernels, SliceOutOfBoundsIsAnError) {
  OpTest t("Slice");
  t.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({1, 1})).Input(I32({2, 1}));
  ExpectError(t.Run(), "Expected size[0] in [0, 1], but got 2");
  OpTest b("Slice");
  b.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({0, 3})).Input(I32({1, 1}));
  ExpectError(b.Run(), "Expected begin[1] in [0, 2], but got 3");
  OpTest r("Slice");
  r.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({0})).Input(I32({1}));
  ExpectError(r.Run(), "vectors of length 2");
}

// ------------------------------------------------------------ Pack, Unpack

TEST(ArrayKernels, PackAlongAxis0And1) {
  OpTest t("Pack");
  t.Input(V<int32_t>({1, 2})).Input(V<int32_t>({3, 4})).Input(V<int32_t>({5, 6}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}), out[0]);

  OpTest u("Pack");
  u.Input(V<float>({1, 2})).Input(V<float>({3, 4})).Input(V<float>({5, 6}));
  SetAttrInt(u.def(), "axis", -1);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> uo, u.Run());
  EXPECT_TENSOR_EQ(V<float>({1, 3, 5, 2, 4, 6}, {2, 3}), uo[0]);
}

TEST(ArrayKernels, PackScalarsAndStrings) {
  OpTest t("Pack");
  t.Input(Tensor::Scalar<std::string>("x")).Input(Tensor::Scalar<std::string>("y"));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"x", "y"}), out[0]);
}

TEST(ArrayKernels, PackRejectsMismatchedShapesAndBadAxis) {
  OpTest t("Pack");
  t.Input(V<float>({1, 2})).Input(V<float>({3}));
  ExpectError(t.Run(), "Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = [1]");
  OpTest a("Pack");
  a.Input(V<float>({1, 2})).Input(V<float>({3, 4}));
  SetAttrInt(a.def(), "axis", 2);
  ExpectError(a.Run(), "axis = 2 not in [-2, 2)");
}

TEST(ArrayKernels, UnpackAxis0IsZeroCopy) {
  Tensor in = V<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  OpTest t("Unpack");
  t.Input(in);
  SetAttrInt(t.def(), "num", 3);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TENSOR_EQ(V<int64_t>({1, 2}), out[0]);
  EXPECT_TENSOR_EQ(V<int64_t>({5, 6}), out[2]);
  EXPECT_TRUE(out[1].SharesBufferWith(in));
}

TEST(ArrayKernels, UnpackNegativeAxisStrings) {
  OpTest t("Unpack");
  t.Input(V<std::string>({"a", "b", "c", "d", "e", "f"}, {3, 2}));
  SetAttrInt(t.def(), "num", 2);
  SetAttrInt(t.def(), "axis", -1);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"a", "c", "e"}), out[0]);
  EXPECT_TENSOR_EQ(V<std::string>({"b", "d", "f"}), out[1]);
}

TEST(ArrayKernels, UnpackNumMismatchIsAnError) {
  OpTest t("Unpack");
  t.Input(V<float>({1, 2, 3}));
  SetAttrInt(t.def(), "num", 2);
  ExpectError(t.Run(), "must equal num = 2");
}

// --------------------------------------------------------------- Transpose

TEST(ArrayKernels, TransposeMatrix) {
  OpTest t("Transpose");
  t.Input(V<float>({1, 2, 3, 4, 5, 6}, {2, 3})).Input(I32({1, 0}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({1, 4, 2, 5, 3, 6}, {3, 2}), out[0]);
}

TEST(ArrayKernels, TransposeRank3MatchesReference) {
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;
  Tensor in = Tensor::FromVector<int32_t>(v, TensorShape({2, 3, 4}));
  for (std::vector<int64_t> perm :
       std::vector<std::vector<int64_t>>{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}) {
    int64_t d[3] = {2, 3, 4};
    std::vector<int32_t> expected;
    int64_t od[3] = {d[perm[0]], d[perm[1]], d[perm[2]]};
    for (int64_t a = 0; a < od[0]; ++a)
      for (int64_t b = 0; b < od[1]; ++b)
        for (int64_t c = 0; c < od[2]; ++c) {
          int64_t idx[3];
          idx[perm[0]] = a;
          idx[perm[1]] = b;
          idx[perm[2]] = c;
          expected.push_back(static_cast<int32_t>(idx[0] * 12 + idx[1] * 4 + idx[2]));
        }
    OpTest t("Transpose");
    t.Input(in).Input(I64(perm));
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_TENSOR_EQ(Tensor::FromVector<int32_t>(expected, TensorShape({od[0], od[1], od[2]})), out[0])
        << perm[0] << perm[1] << perm[2];
  }
}

TEST(ArrayKernels, TransposeWithUnitDimsAndStrings) {
  OpTest t("Transpose");
  t.Input(V<std::string>({"a", "b", "c", "d", "e", "f"}, {1, 2, 3})).Input(I32({2, 0, 1}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"a", "d", "b", "e", "c", "f"}, {3, 1, 2}), out[0]);

  OpTest e("Transpose");
  e.Input(V<double>({}, {0, 3})).Input(I32({1, 0}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> eo, e.Run());
  EXPECT_EQ(eo[0].shape(), TensorShape({3, 0}));
}

TEST(ArrayKernels, TransposeRejectsBadPerm) {
  OpTest t("Transpose");
  t.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({0, 0}));
  ExpectError(t.Run(), "0 is duplicated");
  OpTest r("Transpose");
  r.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({0, 2}));
  ExpectError(r.Run(), "2 is out of range [0 .. 2)");
  OpTest n("Transpose");
  n.Input(V<float>({1, 2, 3, 4}, {2, 2})).Input(I32({0}));
  ExpectError(n.Run(), "transpose expects a vector of size 2");
}

TEST(ArrayKernels, TransposeLargeUsesThreads) {
  const int64_t r = 300, c = 500;
  std::vector<float> v(static_cast<size_t>(r * c)), expected(v.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      v[i * c + j] = static_cast<float>(i * c + j);
      expected[j * r + i] = static_cast<float>(i * c + j);
    }
  OpTest t("Transpose");
  t.Input(Tensor::FromVector<float>(v, TensorShape({r, c}))).Input(I32({1, 0})).IntraOpThreads(2);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>(expected, TensorShape({c, r})), out[0]);
}

// -------------------------------------------------------------------- Tile

TEST(ArrayKernels, TileRepeatsAlongEachAxis) {
  OpTest t("Tile");
  t.Input(V<int32_t>({1, 2, 3, 4}, {2, 2})).Input(I32({2, 3}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,  //
                               1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4},
                              {4, 6}),
                   out[0]);
}

TEST(ArrayKernels, TileStringsAndZeroMultiple) {
  OpTest t("Tile");
  t.Input(V<std::string>({"a", "b"})).Input(I64({2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<std::string>({"a", "b", "a", "b"}), out[0]);
  OpTest z("Tile");
  z.Input(V<float>({1, 2}, {1, 2})).Input(I32({0, 2}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> zo, z.Run());
  EXPECT_EQ(zo[0].shape(), TensorShape({0, 4}));
}

TEST(ArrayKernels, TileRejectsNegativeMultiples) {
  OpTest t("Tile");
  t.Input(V<float>({1, 2})).Input(I32({-1}));
  ExpectError(t.Run(), "Expected multiples[0] >= 0, but got -1");
  OpTest n("Tile");
  n.Input(V<float>({1, 2})).Input(I32({1, 2}));
  ExpectError(n.Run(), "vector of length 1");
}

// ------------------------------------------------------------------- Range

TEST(ArrayKernels, RangeOfEachType) {
  OpTest i("Range");
  i.Input(Tensor::Scalar<int32_t>(3)).Input(Tensor::Scalar<int32_t>(10)).Input(Tensor::Scalar<int32_t>(3));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> io, i.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({3, 6, 9}), io[0]);

  OpTest l("Range");
  l.Input(Tensor::Scalar<int64_t>(5)).Input(Tensor::Scalar<int64_t>(1)).Input(Tensor::Scalar<int64_t>(-2));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> lo, l.Run());
  EXPECT_TENSOR_EQ(V<int64_t>({5, 3}), lo[0]);

  OpTest f("Range");
  f.Input(Tensor::Scalar<float>(0)).Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0.25f));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> fo, f.Run());
  EXPECT_TENSOR_NEAR(V<float>({0, 0.25f, 0.5f, 0.75f}), fo[0], 1e-6);

  OpTest d("Range");
  d.Input(Tensor::Scalar<double>(1)).Input(Tensor::Scalar<double>(1)).Input(Tensor::Scalar<double>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> dout, d.Run());
  EXPECT_EQ(dout[0].shape(), TensorShape({0}));
}

TEST(ArrayKernels, RangeRejectsZeroDeltaAndWrongDirection) {
  OpTest z("Range");
  z.Input(Tensor::Scalar<int32_t>(0)).Input(Tensor::Scalar<int32_t>(5)).Input(Tensor::Scalar<int32_t>(0));
  ExpectError(z.Run(), "Requires delta != 0");
  OpTest w("Range");
  w.Input(Tensor::Scalar<float>(5)).Input(Tensor::Scalar<float>(0)).Input(Tensor::Scalar<float>(1));
  ExpectError(w.Run(), "Requires start <= limit when delta > 0");
}

// ------------------------------------------------------------------ OneHot

TEST(ArrayKernels, OneHotDefaultAxisIgnoresOutOfRange) {
  OpTest t("OneHot");
  t.Input(I64({0, 2, -1, 5}))
      .Input(Tensor::Scalar<int32_t>(3))
      .Input(Tensor::Scalar<float>(1))
      .Input(Tensor::Scalar<float>(0));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {4, 3}), out[0]);
}

TEST(ArrayKernels, OneHotAxis0Int32) {
  OpTest t("OneHot");
  t.Input(I32({1, 0}))
      .Input(Tensor::Scalar<int32_t>(3))
      .Input(Tensor::Scalar<int32_t>(5))
      .Input(Tensor::Scalar<int32_t>(-1));
  SetAttrInt(t.def(), "axis", 0);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({-1, 5, 5, -1, -1, -1}, {3, 2}), out[0]);
}

TEST(ArrayKernels, OneHotRejectsNegativeDepthAndBadAxis) {
  OpTest t("OneHot");
  t.Input(I32({1})).Input(Tensor::Scalar<int32_t>(-3)).Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0));
  ExpectError(t.Run(), "depth must be non-negative, got: -3");
  OpTest a("OneHot");
  a.Input(I32({1})).Input(Tensor::Scalar<int32_t>(3)).Input(Tensor::Scalar<float>(1)).Input(Tensor::Scalar<float>(0));
  SetAttrInt(a.def(), "axis", 2);
  ExpectError(a.Run(), "Expected axis to be -1 or between [0, 1], got 2");
}

// ------------------------------------------- build-time shape inference

// Adds a Placeholder of the given dtype and partial shape.
void AddPlaceholder(Graph* g, const std::string& name, DataType dt, const PartialShape& shape) {
  proto::NodeDef n;
  n.set_name(name);
  n.set_op("Placeholder");
  SetAttrType(&n, "dtype", dt);
  SetAttrShape(&n, "shape", shape);
  ASSERT_TRUE(g->AddNode(n).ok());
}
void AddConst(Graph* g, const std::string& name, const Tensor& v) {
  proto::NodeDef n;
  n.set_name(name);
  n.set_op("Const");
  SetAttrTensor(&n, "value", v);
  SetAttrType(&n, "dtype", v.dtype());
  ASSERT_TRUE(g->AddNode(n).ok());
}
absl::StatusOr<PartialShape> Infer(Graph* g, const std::string& op, const std::vector<std::string>& inputs,
                                   const std::vector<std::pair<std::string, int64_t>>& int_attrs = {}) {
  proto::NodeDef n;
  n.set_name("n" + std::to_string(g->num_nodes()));
  n.set_op(op);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& [k, v] : int_attrs) SetAttrInt(&n, k, v);
  ASSIGN_OR_RETURN(const Node* node, g->AddNode(n));
  return node->output_shape(0);
}

TEST(ArrayShapeInference, PartialShapesFromUnknownInputs) {
  Graph g;
  AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({-1, 3}));
  AddPlaceholder(&g, "shape3", DT_INT32, PartialShape({3}));
  AddPlaceholder(&g, "perm", DT_INT32, PartialShape({2}));
  AddConst(&g, "s", I32({-1, 6}));
  AddConst(&g, "p", I32({1, 0}));
  AddConst(&g, "ax1", Tensor::Scalar<int32_t>(1));
  AddConst(&g, "m", I32({2, 2}));

  auto r = Infer(&g, "Reshape", {"x", "shape3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape::UnknownOfRank(3));
  r = Infer(&g, "Reshape", {"x", "s"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({-1, 6}));
  r = Infer(&g, "Transpose", {"x", "p"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({3, -1}));
  r = Infer(&g, "Transpose", {"x", "perm"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape::UnknownOfRank(2));
  r = Infer(&g, "Concat", {"x", "x", "ax1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({-1, 6}));
  r = Infer(&g, "Tile", {"x", "m"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({-1, 6}));
  r = Infer(&g, "Shape", {"x"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({2}));
  r = Infer(&g, "Pack", {"x", "x"}, {{"axis", 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape({-1, 2, 3}));
  r = Infer(&g, "Fill", {"shape3", "ax1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, PartialShape::UnknownOfRank(3));
}

TEST(ArrayShapeInference, ReshapeMismatchIsABuildTimeError) {
  Graph g;
  AddConst(&g, "x", V<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  AddConst(&g, "s", I32({5}));
  auto r = Infer(&g, "Reshape", {"x", "s"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("Cannot reshape a tensor of shape [2,3]"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace distflow
