// Gather/GatherV2, Unique, UnsortedSegmentSum, DynamicPartition/Stitch and
// SparseSegmentSum/Mean against NumPy's results (expected values computed
// with NumPy: fancy indexing, np.take, np.add.at); every output shape is also
// checked against the shape function by OpTest. Bad ids must be errors that
// name the op, the position, the id and the bound.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

template <typename T>
Tensor Iota(TensorShape shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  auto f = t.flat<T>();
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<T>(i);
  return t;
}
Tensor I32(std::vector<int32_t> v, TensorShape s) { return Tensor::FromVector<int32_t>(v, s); }
Tensor I32(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }
Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }
Tensor F64(std::vector<double> v, TensorShape s) { return Tensor::FromVector<double>(v, s); }

absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, const std::vector<Tensor>& in,
                                          const std::function<void(proto::NodeDef*)>& attrs = nullptr) {
  OpTest t(op);
  for (const Tensor& x : in) t.Input(x);
  if (attrs) attrs(t.def());
  return t.Run();
}

TEST(GatherKernel, MatchesNumpyFancyIndexingWithInt32AndInt64Ids) {
  // np.arange(12).reshape(4, 3)[[[3, 0], [1, 1]]]
  const Tensor want = I32({9, 10, 11, 0, 1, 2, 3, 4, 5, 3, 4, 5}, TensorShape({2, 2, 3}));
  auto a = RunOp("Gather", {Iota<int32_t>(TensorShape({4, 3})), I32({3, 0, 1, 1}, TensorShape({2, 2}))});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TENSOR_EQ(want, (*a)[0]);
  Tensor ids64(DT_INT64, TensorShape({2, 2}));
  std::vector<int64_t> v = {3, 0, 1, 1};
  std::copy(v.begin(), v.end(), ids64.flat<int64_t>().data());
  auto b = RunOp("Gather", {Iota<int32_t>(TensorShape({4, 3})), ids64});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TENSOR_EQ(want, (*b)[0]);
}

TEST(GatherKernel, V2MatchesNumpyTakeAlongInnerAxes) {
  // np.take(np.arange(12).reshape(2, 3, 2), [2, 0], axis=1)
  auto a = RunOp("GatherV2", {Iota<int32_t>(TensorShape({2, 3, 2})), I32({2, 0}), Tensor::Scalar<int32_t>(1)});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TENSOR_EQ(I32({4, 5, 0, 1, 10, 11, 6, 7}, TensorShape({2, 2, 2})), (*a)[0]);
  // np.take(..., [[1], [0]], axis=2) (axis given as -1)
  auto b = RunOp("GatherV2", {Iota<int32_t>(TensorShape({2, 3, 2})), I32({1, 0}, TensorShape({2, 1})),
                              Tensor::Scalar<int64_t>(-1)});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TENSOR_EQ(I32({1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10}, TensorShape({2, 3, 2, 1})), (*b)[0]);
}

TEST(GatherKernel, OutOfRangeAndNegativeIdsNameOpIdAndBound) {
  auto a = RunOp("Gather", {Iota<float>(TensorShape({4, 2})), I32({1, 7})});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("Gather"), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find("indices[1] = 7 is not in [0, 4)"), std::string::npos) << a.status();
  auto b = RunOp("GatherV2", {Iota<float>(TensorShape({4, 2})), I64({-2}), Tensor::Scalar<int32_t>(0)});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("indices[0] = -2 is not in [0, 4)"), std::string::npos) << b.status();
  auto c = RunOp("GatherV2", {Iota<float>(TensorShape({4, 2})), I32({0}), Tensor::Scalar<int32_t>(2)});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("axis 2"), std::string::npos) << c.status();
}

TEST(GatherKernel, AsksForItsTableUnderTheVariablesLockNotASnapshot) {
  // The executor gives such an input as the variable itself
  // (runtime/executor.cc): a snapshot held while the rows are copied would
  // make a concurrent sparse update of the table copy all of it.
  for (const std::string op : {"Gather", "GatherV2"}) {
    proto::NodeDef def;
    def.set_name("lookup");
    def.set_op(op);
    SetAttrType(&def, "Tparams", DT_FLOAT);
    SetAttrType(&def, "Tindices", DT_INT64);
    std::vector<DataType> in = {DT_FLOAT, DT_INT64};
    if (op == "GatherV2") in.push_back(DT_INT64);
    auto k = KernelRegistry::Global()->CreateKernel(def, in, {DT_FLOAT}, nullptr);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_TRUE((*k)->ReadsVariableInputUnderLock(0)) << op;
    EXPECT_FALSE((*k)->ReadsVariableInputUnderLock(1)) << op;
  }
}

TEST(GatherKernel, EstimatesTheRowsItCopiesNotTheTable) {
  // 512 rows of a 20000 x 64 table: little enough to run inline on the
  // thread that made the lookup ready (runtime/executor.cc), not the 1.28M
  // elements of the table. GatherV2's axis is a value: it counts the axis
  // that copies the most.
  OpTest t("Gather");
  t.Input(Tensor(DT_FLOAT, TensorShape({20000, 64}))).Input(Tensor(DT_INT64, TensorShape({512})));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, t.EstimatedWork());
  EXPECT_EQ(w, 512 * 64 + 512);
  OpTest v2("GatherV2");
  v2.Input(Tensor(DT_FLOAT, TensorShape({20000, 64})))
      .Input(Tensor(DT_INT64, TensorShape({512})))
      .Input(Tensor::Scalar<int32_t>(1));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w2, v2.EstimatedWork());
  EXPECT_EQ(w2, int64_t{512} * 20000 + 512);
}

TEST(UniqueKernel, KeepsFirstAppearanceOrder) {
  auto a = RunOp("Unique", {I64({4, 1, 4, 2, 1})}, [](proto::NodeDef* n) { SetAttrType(n, "out_idx", DT_INT64); });
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TENSOR_EQ(I64({4, 1, 2}), (*a)[0]);
  EXPECT_TENSOR_EQ(I64({0, 1, 0, 2, 1}), (*a)[1]);
}

TEST(UnsortedSegmentSumKernel, MatchesNumpyAddAtAndDropsNegativeIds) {
  auto a =
      RunOp("UnsortedSegmentSum", {Iota<double>(TensorShape({4, 2})), I32({1, -1, 1, 0}), Tensor::Scalar<int32_t>(3)});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TENSOR_EQ(F64({6, 7, 4, 6, 0, 0}, TensorShape({3, 2})), (*a)[0]);
  auto b = RunOp("UnsortedSegmentSum", {Iota<double>(TensorShape({2, 2})), I32({0, 3}), Tensor::Scalar<int32_t>(3)});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("segment_ids[1] = 3 is not in [0, 3)"), std::string::npos) << b.status();
}

TEST(DynamicPartitionKernel, StitchInvertsPartition) {
  const Tensor data = Iota<float>(TensorShape({5, 2}));
  const Tensor parts = I32({1, 0, 1, 1, 0});
  auto p = RunOp("DynamicPartition", {data, parts}, [](proto::NodeDef* n) { SetAttrInt(n, "num_partitions", 2); });
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({2, 3, 8, 9}, TensorShape({2, 2})), (*p)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 1, 4, 5, 6, 7}, TensorShape({3, 2})), (*p)[1]);
  auto s = RunOp("DynamicStitch", {I32({1, 4}), I32({0, 2, 3}), (*p)[0], (*p)[1]},
                 [](proto::NodeDef* n) { SetAttrInt(n, "N", 2); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TENSOR_EQ(data, (*s)[0]);
  auto bad = RunOp("DynamicPartition", {data, I32({0, 0, 2, 0, 0})},
                   [](proto::NodeDef* n) { SetAttrInt(n, "num_partitions", 2); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("partitions[2] = 2 is not in [0, 2)"), std::string::npos) << bad.status();
}

TEST(SparseSegmentKernel, SumAndMeanMatchNumpy) {
  const Tensor data = Iota<double>(TensorShape({5, 2}));
  auto sum = RunOp("SparseSegmentSum", {data, I32({4, 0, 4, 2}), I32({0, 0, 2, 2})});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_TENSOR_EQ(F64({8, 10, 0, 0, 12, 14}, TensorShape({3, 2})), (*sum)[0]);
  auto mean = RunOp("SparseSegmentMean", {data, I64({4, 0, 4, 2}), I32({0, 0, 2, 2})});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_TENSOR_NEAR(F64({4, 5, 0, 0, 6, 7}, TensorShape({3, 2})), (*mean)[0], 1e-12);
  auto unsorted = RunOp("SparseSegmentSum", {data, I32({0, 1}), I32({1, 0})});
  ASSERT_FALSE(unsorted.ok());
  EXPECT_NE(unsorted.status().message().find("sorted"), std::string::npos) << unsorted.status();
  auto out_of_range = RunOp("SparseSegmentMean", {data, I32({0, 5}), I32({0, 0})});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("indices[1] = 5 is not in [0, 5)"), std::string::npos);
}

}  // namespace
}  // namespace distflow
