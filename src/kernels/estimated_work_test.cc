// OpKernel::EstimatedWork decides whether an expensive kernel may run inline
// on the thread that made it ready (an RPC thread included) or goes to the
// pool, so it must not underestimate: broadcasting and matrix products do far
// more work than their inputs' sizes, and kernels whose work is an input's
// value tell from that value.
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

TEST(EstimatedWork, ValueDrivenKernelsTellFromTheirValues) {
  // The shapes alone cannot tell (OpKernel::EstimatedWork is -1); the values
  // the executor holds when the node is ready can (kernels/work_from_values.h),
  // so a large Fill or Tile still goes to the pool and a small Range does not.
  OpTest fill("Fill");
  fill.Input(Tensor::FromVector<int32_t>({1000, 1000})).Input(Tensor::Scalar<float>(1.f));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, fill.EstimatedWork());
  EXPECT_EQ(w, 1000 * 1000);
  OpTest tile("Tile");
  tile.Input(Zeros(DT_FLOAT, TensorShape({2}))).Input(Tensor::FromVector<int32_t>({100000}));
  DF_ASSERT_OK_AND_ASSIGN(int64_t wt, tile.EstimatedWork());
  EXPECT_EQ(wt, 2 * 100000);
  OpTest range("Range");
  SetAttrType(range.def(), "Tidx", DT_INT32);
  range.Input(Tensor::Scalar<int32_t>(0)).Input(Tensor::Scalar<int32_t>(512)).Input(Tensor::Scalar<int32_t>(2));
  DF_ASSERT_OK_AND_ASSIGN(int64_t wr, range.EstimatedWork());
  EXPECT_EQ(wr, 256);
}

}  // namespace
}  // namespace distflow
