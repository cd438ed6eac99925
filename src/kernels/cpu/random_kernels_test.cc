#include <cmath>
#include <memory>

#include "base/logging.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

// One kernel kept across runs (OpTest would build a fresh kernel every Run).
class RandomKernel {
 public:
  RandomKernel(const std::string& op, DataType dtype, int64_t seed, int64_t seed2, std::vector<int64_t> shape)
      : device_("/job:localhost/replica:0/task:0/device:CPU:0", kCpu, nullptr),
        shape_(Tensor::FromVector<int64_t>(shape)) {
    def_.set_name("rng");
    def_.set_op(op);
    SetAttrType(&def_, "dtype", dtype);
    SetAttrType(&def_, "T", DT_INT64);
    SetAttrInt(&def_, "seed", seed);
    SetAttrInt(&def_, "seed2", seed2);
    auto k = KernelRegistry::Global()->CreateKernel(def_, {DT_INT64}, {dtype}, &device_);
    CHECK(k.ok()) << k.status();
    kernel_ = std::move(*k);
  }

  Tensor Run() {
    OpKernelContext::Params p;
    p.device = &device_;
    p.kernel = kernel_.get();
    p.inputs = {shape_};
    OpKernelContext ctx(std::move(p));
    absl::Status s = kernel_->Compute(&ctx);
    CHECK(s.ok()) << s;
    return ctx.output(0);
  }

 private:
  proto::NodeDef def_;
  Device device_;
  Tensor shape_;
  std::unique_ptr<OpKernel> kernel_;
};

const char* const kOps[] = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};

TEST(RandomKernels, SameSeedsGiveSameSequence) {
  for (const char* op : kOps) {
    for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
      SCOPED_TRACE(op);
      RandomKernel k1(op, dt, 42, 7, {3, 5});
      RandomKernel k2(op, dt, 42, 7, {3, 5});
      Tensor a1 = k1.Run(), a2 = k1.Run();
      Tensor b1 = k2.Run(), b2 = k2.Run();
      EXPECT_TENSOR_EQ(a1, b1);
      EXPECT_TENSOR_EQ(a2, b2);
      EXPECT_FALSE(test::TensorEqual(a1, a2)) << "successive runs should differ";
      // Only seed2 set is seeded too, and differs from (42, 7).
      RandomKernel k3(op, dt, 0, 7, {3, 5});
      RandomKernel k4(op, dt, 0, 7, {3, 5});
      Tensor c = k3.Run();
      EXPECT_TENSOR_EQ(c, k4.Run());
      EXPECT_FALSE(test::TensorEqual(a1, c));
    }
  }
}

TEST(RandomKernels, UnseededKernelsDiffer) {
  for (const char* op : kOps) {
    RandomKernel k1(op, DT_FLOAT, 0, 0, {64});
    RandomKernel k2(op, DT_FLOAT, 0, 0, {64});
    EXPECT_FALSE(test::TensorEqual(k1.Run(), k2.Run())) << op;
  }
}

struct Stats {
  double mean = 0, stddev = 0, min = 1e300, max = -1e300;
};

template <typename T>
Stats Compute(const Tensor& t) {
  Stats s;
  double sum = 0, sq = 0;
  for (T v : t.flat<T>()) {
    const double x = static_cast<double>(v);
    sum += x;
    sq += x * x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  const double n = static_cast<double>(t.NumElements());
  s.mean = sum / n;
  s.stddev = std::sqrt(sq / n - s.mean * s.mean);
  return s;
}

template <typename T>
void CheckDistributions(DataType dt) {
  constexpr int64_t kN = 100000;
  {
    Tensor u = RandomKernel("RandomUniform", dt, 1, 2, {100, 1000}).Run();
    ASSERT_EQ(u.shape(), TensorShape({100, 1000}));
    Stats s = Compute<T>(u);
    EXPECT_GE(s.min, 0.0);
    EXPECT_LT(s.max, 1.0);
    EXPECT_NEAR(s.mean, 0.5, 0.01);
    EXPECT_NEAR(s.stddev, std::sqrt(1.0 / 12), 0.01);
  }
  {
    Tensor z = RandomKernel("RandomStandardNormal", dt, 3, 4, {kN}).Run();
    Stats s = Compute<T>(z);
    EXPECT_NEAR(s.mean, 0.0, 0.02);
    EXPECT_NEAR(s.stddev, 1.0, 0.02);
    EXPECT_LT(s.min, -3.0);  // the tails are there
    EXPECT_GT(s.max, 3.0);
  }
  {
    Tensor z = RandomKernel("TruncatedNormal", dt, 5, 6, {kN}).Run();
    Stats s = Compute<T>(z);
    EXPECT_GE(s.min, -2.0);
    EXPECT_LE(s.max, 2.0);
    EXPECT_NEAR(s.mean, 0.0, 0.02);
    // The stddev of a standard normal truncated to [-2, 2] is about 0.8796.
    EXPECT_NEAR(s.stddev, 0.8796, 0.02);
  }
}

TEST(RandomKernels, DistributionsFloat) { CheckDistributions<float>(DT_FLOAT); }
TEST(RandomKernels, DistributionsDouble) { CheckDistributions<double>(DT_DOUBLE); }

TEST(RandomKernels, ThroughGraphWithInt32ShapeAndEmptyOutput) {
  for (const char* op : kOps) {
    test::OpTest t(op);
    t.Input(Tensor::FromVector<int32_t>({2, 0, 3}));
    SetAttrType(t.def(), "dtype", DT_FLOAT);
    SetAttrInt(t.def(), "seed", 9);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_EQ(out[0].shape(), TensorShape({2, 0, 3}));
    EXPECT_EQ(out[0].dtype(), DT_FLOAT);
  }
}

TEST(RandomKernels, NegativeShapeIsAnError) {
  test::OpTest t("RandomUniform");
  t.Input(Tensor::FromVector<int64_t>({2, -1}));
  SetAttrType(t.def(), "dtype", DT_DOUBLE);
  EXPECT_FALSE(t.Run().ok());
}

}  // namespace
}  // namespace distflow
