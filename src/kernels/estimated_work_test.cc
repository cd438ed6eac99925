// OpKernel::EstimatedWork decides whether an expensive kernel may run inline
// on the thread that made it ready (an RPC thread included) or goes to the
// pool, so it must not underestimate: broadcasting and matrix products do far
// more work than their inputs' sizes, and kernels whose work is an input's
// value cannot tell.
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"

namespace distflow {
namespace {

using test::OpTest;

Tensor Zeros(DataType dt, TensorShape s) { return Tensor(dt, s); }

TEST(EstimatedWork, DefaultIsOnePassOverTheInputs) {
  OpTest t("Relu");
  t.Input(Zeros(DT_FLOAT, TensorShape({50, 784})));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, t.EstimatedWork());
  EXPECT_EQ(w, 50 * 784);
}

TEST(EstimatedWork, BroadcastingCountsTheOutput) {
  OpTest t("Add");
  t.Input(Zeros(DT_FLOAT, TensorShape({2048, 1}))).Input(Zeros(DT_FLOAT, TensorShape({1, 2048})));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, t.EstimatedWork());
  EXPECT_EQ(w, int64_t{2048} * 2048) << "4096 input elements, 4M outputs";
}

TEST(EstimatedWork, MatMulCountsMultiplyAdds) {
  OpTest t("MatMul");
  t.Input(Zeros(DT_FLOAT, TensorShape({50, 784}))).Input(Zeros(DT_FLOAT, TensorShape({784, 10})));
  SetAttrBool(t.def(), "transpose_a", false);
  SetAttrBool(t.def(), "transpose_b", false);
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, t.EstimatedWork());
  EXPECT_EQ(w, int64_t{50} * 784 * 10 / 16);
  OpTest big("MatMul");
  big.Input(Zeros(DT_FLOAT, TensorShape({256, 256}))).Input(Zeros(DT_FLOAT, TensorShape({256, 256})));
  SetAttrBool(big.def(), "transpose_a", false);
  SetAttrBool(big.def(), "transpose_b", true);
  DF_ASSERT_OK_AND_ASSIGN(int64_t wb, big.EstimatedWork());
  EXPECT_GT(wb, 256 * 256 * 2) << "far more than a pass over its 131072 input elements";
}

TEST(EstimatedWork, ValueDrivenKernelsCannotTell) {
  OpTest fill("Fill");
  fill.Input(Tensor::FromVector<int32_t>({1000, 1000})).Input(Tensor::Scalar<float>(1.f));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, fill.EstimatedWork());
  EXPECT_EQ(w, -1);
  OpTest tile("Tile");
  tile.Input(Zeros(DT_FLOAT, TensorShape({2}))).Input(Tensor::FromVector<int32_t>({100000}));
  DF_ASSERT_OK_AND_ASSIGN(int64_t wt, tile.EstimatedWork());
  EXPECT_EQ(wt, -1);
}

}  // namespace
}  // namespace distflow
