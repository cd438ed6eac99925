// StridedSlice, StridedSliceGrad, Split and SplitV against NumPy's results
// (basic indexing, np.split); every output shape is also checked against
// the shape function by OpTest.
#include <cstdint>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

Tensor Iota(TensorShape shape) {
  Tensor t(DT_INT32, shape);
  auto f = t.flat<int32_t>();
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<int32_t>(i);
  return t;
}
Tensor I32(std::vector<int32_t> v, TensorShape s) { return Tensor::FromVector<int32_t>(v, s); }
Tensor I32(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }

struct Masks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink = 0;
};

absl::StatusOr<Tensor> Slice(const Tensor& x, std::vector<int32_t> b, std::vector<int32_t> e, std::vector<int32_t> st,
                             Masks m) {
  OpTest t("StridedSlice");
  t.Input(x).Input(I32(b)).Input(I32(e)).Input(I32(st));
  SetAttrInt(t.def(), "begin_mask", m.begin);
  SetAttrInt(t.def(), "end_mask", m.end);
  SetAttrInt(t.def(), "ellipsis_mask", m.ellipsis);
  SetAttrInt(t.def(), "new_axis_mask", m.new_axis);
  SetAttrInt(t.def(), "shrink_axis_mask", m.shrink);
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
}

TEST(StridedSliceKernel, MatchesNumpyBasicIndexing) {
  const Tensor x = Iota(TensorShape({2, 3, 4}));
  struct Case {
    const char* what;
    std::vector<int32_t> b, e, st;
    Masks m;
    Tensor want;
  };
  const std::vector<Case> cases = {
      {"x[:, 1:3]",
       {0, 1},
       {0, 3},
       {1, 1},
       {1, 1},
       I32({4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}, TensorShape({2, 2, 4}))},
      {"x[1]",
       {1},
       {2},
       {1},
       {0, 0, 0, 0, 1},
       I32({12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, TensorShape({3, 4}))},
      {"x[..., ::-2]",
       {0, 0},
       {0, 0},
       {1, -2},
       {2, 2, 1},
       I32({3, 1, 7, 5, 11, 9, 15, 13, 19, 17, 23, 21}, TensorShape({2, 3, 2}))},
      {"x[:, None, 2]",
       {0, 0, 2},
       {0, 0, 3},
       {1, 1, 1},
       {1, 1, 0, 2, 4},
       I32({8, 9, 10, 11, 20, 21, 22, 23}, TensorShape({2, 1, 4}))},
      {"x[-1:-3:-1, ::2, 1]",
       {-1, 0, 1},
       {-3, 0, 2},
       {-1, 2, 1},
       {2, 2, 0, 0, 4},
       I32({13, 21, 1, 9}, TensorShape({2, 2}))},
      {"x[5:, 1]", {5, 1}, {0, 2}, {1, 1}, {0, 1, 0, 0, 2}, Tensor(DT_INT32, TensorShape({0, 4}))},
      {"x[..., None]", {0, 0}, {0, 0}, {1, 1}, {0, 0, 1, 2}, Iota(TensorShape({2, 3, 4, 1}))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    DF_ASSERT_OK_AND_ASSIGN(Tensor out, Slice(x, c.b, c.e, c.st, c.m));
    EXPECT_TENSOR_EQ(c.want, out);
  }
}

TEST(StridedSliceKernel, BadSpecsFailNamingTheValue) {
  const Tensor x = Iota(TensorShape({2, 3}));
  auto expect = [&](absl::StatusOr<Tensor> r, const std::string& text) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find(text), std::string::npos) << r.status();
  };
  expect(Slice(x, {0}, {1}, {0}, {}), "strides[0] must be non-zero");
  expect(Slice(x, {5}, {6}, {1}, {0, 0, 0, 0, 1}), "index 5 of dimension 0 is out of bounds");
  expect(Slice(x, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {}), "3 indices for an input of rank 2");
  expect(Slice(x, {0, 0}, {1}, {1, 1}, {}), "same length");
}

TEST(StridedSliceKernel, GradScattersIntoZeros) {
  OpTest t("StridedSliceGrad");
  t.Input(I32({2, 3}))
      .Input(I32({0, -1}))
      .Input(I32({0, 0}))
      .Input(I32({1, -2}))
      .Input(I32({1, 2, 3, 4}, TensorShape({2, 2})));
  SetAttrInt(t.def(), "begin_mask", 1);
  SetAttrInt(t.def(), "end_mask", 3);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  // x[:, ::-2] of a [2, 3] takes columns 2 and 0.
  EXPECT_TENSOR_EQ(I32({2, 0, 1, 4, 0, 3}, TensorShape({2, 3})), out[0]);
}

TEST(SplitKernel, EqualPartsAlongAnyAxis) {
  OpTest t("Split");
  t.Input(Tensor::FromVector<int32_t>({1}, TensorShape({}))).Input(Iota(TensorShape({2, 4})));
  SetAttrInt(t.def(), "num_split", 2);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(I32({0, 1, 4, 5}, TensorShape({2, 2})), out[0]);
  EXPECT_TENSOR_EQ(I32({2, 3, 6, 7}, TensorShape({2, 2})), out[1]);

  OpTest rows("Split");
  rows.Input(Tensor::FromVector<int32_t>({0}, TensorShape({}))).Input(Iota(TensorShape({2, 4})));
  SetAttrInt(rows.def(), "num_split", 2);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> r, rows.Run());
  EXPECT_TENSOR_EQ(I32({4, 5, 6, 7}, TensorShape({1, 4})), r[1]);
}

TEST(SplitKernel, IndivisibleDimensionIsAnError) {
  OpTest t("Split");
  t.Input(Tensor::FromVector<int32_t>({1}, TensorShape({}))).Input(Iota(TensorShape({2, 3})));
  SetAttrInt(t.def(), "num_split", 2);
  absl::StatusOr<std::vector<Tensor>> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("not divisible by num_split = 2"), std::string::npos) << r.status();
}

TEST(SplitVKernel, SizesWithOneInferred) {
  OpTest t("SplitV");
  t.Input(Iota(TensorShape({2, 5}))).Input(I32({1, -1, 2})).Input(Tensor::FromVector<int32_t>({-1}, TensorShape({})));
  SetAttrInt(t.def(), "num_split", 3);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(I32({0, 5}, TensorShape({2, 1})), out[0]);
  EXPECT_TENSOR_EQ(I32({1, 2, 6, 7}, TensorShape({2, 2})), out[1]);
  EXPECT_TENSOR_EQ(I32({3, 4, 8, 9}, TensorShape({2, 2})), out[2]);
}

TEST(SplitVKernel, SizesThatDoNotAddUpAreAnError) {
  OpTest t("SplitV");
  t.Input(Iota(TensorShape({2, 5}))).Input(I32({1, 2})).Input(Tensor::FromVector<int32_t>({1}, TensorShape({})));
  SetAttrInt(t.def(), "num_split", 2);
  absl::StatusOr<std::vector<Tensor>> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("size_splits"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace distflow
