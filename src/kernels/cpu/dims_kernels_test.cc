// ExpandDims, Squeeze, Pad, PadV2 and Where against NumPy's results
// (np.expand_dims, np.squeeze, np.pad, np.argwhere).
#include <cstdint>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

Tensor I32(std::vector<int32_t> v, TensorShape s) { return Tensor::FromVector<int32_t>(v, s); }
Tensor Scalar(int32_t v) { return Tensor::FromVector<int32_t>({v}, TensorShape({})); }

std::string Message(const absl::StatusOr<std::vector<Tensor>>& r) {
  return r.ok() ? "ok" : std::string(r.status().message());
}

TEST(DimsKernels, ExpandDimsInsertsAnAxis) {
  const Tensor x = I32({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  for (auto [axis, shape] : std::vector<std::pair<int32_t, TensorShape>>{{0, TensorShape({1, 2, 3})},
                                                                         {2, TensorShape({2, 3, 1})},
                                                                         {-1, TensorShape({2, 3, 1})},
                                                                         {-3, TensorShape({1, 2, 3})}}) {
    OpTest t("ExpandDims");
    t.Input(x).Input(Scalar(axis));
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_EQ(out[0].shape(), shape) << "axis " << axis;
  }
  OpTest bad("ExpandDims");
  bad.Input(x).Input(Scalar(3));
  EXPECT_NE(Message(bad.Run()).find("dim 3 is out of range [-3, 2]"), std::string::npos) << Message(bad.Run());
}

TEST(DimsKernels, SqueezeDropsSizeOneAxes) {
  const Tensor x = I32({1, 2, 3}, TensorShape({1, 3, 1}));
  OpTest all("Squeeze");
  all.Input(x);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, all.Run());
  EXPECT_TENSOR_EQ(I32({1, 2, 3}, TensorShape({3})), a[0]);
  OpTest last("Squeeze");
  last.Input(x);
  SetAttrIntList(last.def(), "squeeze_dims", {-1});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> l, last.Run());
  EXPECT_EQ(l[0].shape(), TensorShape({1, 3}));
  OpTest bad("Squeeze");
  bad.Input(x);
  SetAttrIntList(bad.def(), "squeeze_dims", {1});
  EXPECT_NE(Message(bad.Run()).find("can not squeeze axis 1"), std::string::npos) << Message(bad.Run());
}

TEST(DimsKernels, PadMatchesNumpy) {
  OpTest t("Pad");
  t.Input(I32({0, 1, 2, 3, 4, 5}, TensorShape({2, 3}))).Input(I32({1, 0, 2, 1}, TensorShape({2, 2})));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(I32({0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 3, 4, 5, 0}, TensorShape({3, 6})), out[0]);

  OpTest v2("PadV2");
  v2.Input(Tensor::FromVector<float>({1, 2}))
      .Input(I32({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::FromVector<float>({-1}, TensorShape({})));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> o2, v2.Run());
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({-1, 1, 2, -1, -1}), o2[0]);
}

TEST(DimsKernels, PadRejectsBadPaddings) {
  OpTest neg("Pad");
  neg.Input(I32({1, 2}, TensorShape({2}))).Input(I32({-1, 0}, TensorShape({1, 2})));
  EXPECT_NE(Message(neg.Run()).find("non-negative"), std::string::npos) << Message(neg.Run());
  OpTest rows("Pad");
  rows.Input(I32({1, 2}, TensorShape({2}))).Input(I32({0, 0, 0, 0}, TensorShape({2, 2})));
  EXPECT_NE(Message(rows.Run()).find("one row per dimension"), std::string::npos) << Message(rows.Run());
}

TEST(DimsKernels, WhereGivesCoordinatesOfTrueElements) {
  Tensor b(DT_BOOL, TensorShape({3, 2}));
  const bool v[] = {true, false, false, true, true, true};
  for (int i = 0; i < 6; ++i) b.flat<bool>()[i] = v[i];
  OpTest t("Where");
  t.Input(b);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_EQ(Tensor::FromVector<int64_t>({0, 0, 1, 1, 2, 0, 2, 1}, TensorShape({4, 2})), out[0]);

  OpTest f("Where");
  f.Input(Tensor::FromVector<float>({0, 2.5f, 0, -1}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> fo, f.Run());
  EXPECT_TENSOR_EQ(Tensor::FromVector<int64_t>({1, 3}, TensorShape({2, 1})), fo[0]);
}

}  // namespace
}  // namespace distflow
