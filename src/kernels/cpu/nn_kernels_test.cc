#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

#define EXPECT_ERROR_CONTAINS(status_or, text)                                                        \
  do {                                                                                                \
    auto df_r_ = (status_or);                                                                         \
    ASSERT_FALSE(df_r_.ok());                                                                         \
    EXPECT_NE(std::string(df_r_.status().message()).find(text), std::string::npos) << df_r_.status(); \
  } while (0)

std::vector<double> RandomValues(int64_t n, uint32_t seed, double lo = -3, double hi = 3) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(gen);
  return v;
}

Tensor Make(DataType dt, const std::vector<double>& v, const TensorShape& s) {
  Tensor t(dt, s);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_FLOAT) {
      t.flat<float>()[i] = static_cast<float>(v[i]);
    } else {
      t.flat<double>()[i] = v[i];
    }
  }
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<Tensor> inputs, int threads = 0) {
  OpTest t(op);
  for (const Tensor& in : inputs) t.Input(in);
  if (threads) t.IntraOpThreads(threads);
  return t.Run();
}

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

struct ActCase {
  const char* op;
  std::function<double(double)> f;
  const char* grad;
  // grad(a, b) with TF's argument order; `x` is the forward input.
  std::function<double(double x, double g)> df;
  bool grad_takes_output;  // the second grad input is the activation's output
  bool output_first;       // (y, dy) order
};

class ActTest : public ::testing::TestWithParam<DataType> {};

TEST_P(ActTest, ActivationsAndGradsMatchReference) {
  const DataType dt = GetParam();
  const double tol = dt == DT_FLOAT ? 2e-5 : 1e-12;
  std::vector<ActCase> cases = {
      {"Relu", [](double x) { return x > 0 ? x : 0; }, "ReluGrad", [](double x, double g) { return x > 0 ? g : 0; },
       false, false},
      {"Relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }, "Relu6Grad",
       [](double x, double g) { return x > 0 && x < 6 ? g : 0; }, false, false},
      {"Elu", [](double x) { return x < 0 ? std::expm1(x) : x; }, "EluGrad",
       [](double x, double g) { return x < 0 ? g * std::exp(x) : g; }, true, false},
      {"Sigmoid", Sigmoid, "SigmoidGrad", [](double x, double g) { return g * Sigmoid(x) * (1 - Sigmoid(x)); }, true,
       true},
      {"Tanh", [](double x) { return std::tanh(x); }, "TanhGrad",
       [](double x, double g) { return g * (1 - std::tanh(x) * std::tanh(x)); }, true, true},
      {"Softplus", [](double x) { return std::log1p(std::exp(x)); }, "SoftplusGrad",
       [](double x, double g) { return g * Sigmoid(x); }, false, false},
  };
  const TensorShape s({5, 7});
  std::vector<double> x = RandomValues(35, 1, -8, 8);
  x[0] = 0.5;
  x[1] = 6.5;
  x[2] = -0.25;
  const std::vector<double> g = RandomValues(35, 2);
  for (const ActCase& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<double> y(35), dx(35);
    for (size_t i = 0; i < 35; ++i) {
      y[i] = c.f(x[i]);
      dx[i] = c.df(x[i], g[i]);
    }
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunOp(c.op, {Make(dt, x, s)}));
    EXPECT_TENSOR_NEAR(Make(dt, y, s), out[0], tol);
    const Tensor second = c.grad_takes_output ? Make(dt, y, s) : Make(dt, x, s);
    std::vector<Tensor> grad_in =
        c.output_first ? std::vector<Tensor>{second, Make(dt, g, s)} : std::vector<Tensor>{Make(dt, g, s), second};
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> gout, RunOp(c.grad, grad_in));
    EXPECT_TENSOR_NEAR(Make(dt, dx, s), gout[0], tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ActTest, ::testing::Values(DT_FLOAT, DT_DOUBLE));

TEST(Activations, LargeTensorThreadedMatchesSingleThread) {
  const TensorShape s({300, 500});
  const Tensor x = Make(DT_FLOAT, RandomValues(s.num_elements(), 3), s);
  for (const char* op : {"Relu", "Tanh", "Sigmoid", "Softplus", "Elu"}) {
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, RunOp(op, {x}));
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, RunOp(op, {x}, 2));
    EXPECT_TENSOR_EQ(a[0], b[0]);
  }
}

TEST(Activations, SoftplusIsStableForLargeInputs) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunOp("Softplus", {Tensor::FromVector<float>({1000, -1000, 0})}));
  EXPECT_TENSOR_NEAR(Tensor::FromVector<float>({1000, 0, std::log(2.0f)}), out[0], 1e-5);
}

TEST(Activations, GradShapeMismatchFails) {
  EXPECT_FALSE(RunOp("ReluGrad", {Tensor::FromVector<float>({1, 2}), Tensor::FromVector<float>({1, 2, 3})}).ok());
}

TEST(BiasAdd, AddsAlongLastDimensionAndGradSums) {
  const TensorShape s({2, 3, 2, 4});
  const std::vector<double> v = RandomValues(s.num_elements(), 4), b = RandomValues(4, 5), g = RandomValues(48, 6);
  std::vector<double> y(v.size()), db(4, 0.0);
  for (size_t i = 0; i < v.size(); ++i) {
    y[i] = v[i] + b[i % 4];
    db[i % 4] += g[i];
  }
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunOp("BiasAdd", {Make(dt, v, s), Make(dt, b, TensorShape({4}))}));
    EXPECT_TENSOR_NEAR(Make(dt, y, s), out[0], 1e-5);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> gout, RunOp("BiasAddGrad", {Make(dt, g, s)}, 2));
    EXPECT_TENSOR_NEAR(Make(dt, db, TensorShape({4})), gout[0], 1e-5);
  }
}

TEST(BiasAdd, GradOverManyRows) {
  const TensorShape s({1000, 3});
  const std::vector<double> g = RandomValues(3000, 7);
  std::vector<double> db(3, 0.0);
  for (size_t i = 0; i < g.size(); ++i) db[i % 3] += g[i];
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunOp("BiasAddGrad", {Make(DT_DOUBLE, g, s)}, 2));
  EXPECT_TENSOR_NEAR(Make(DT_DOUBLE, db, TensorShape({3})), out[0], 1e-10);
}

TEST(BiasAdd, BiasSizeMismatchFails) {
  auto r = RunOp("BiasAdd", {Make(DT_FLOAT, RandomValues(6, 1), TensorShape({2, 3})),
                             Make(DT_FLOAT, RandomValues(2, 1), TensorShape({2}))});
  EXPECT_ERROR_CONTAINS(r, "[2,3]");
}

// Reference softmax, log-softmax and xent in double with log-sum-exp.
void RefSoftmax(const std::vector<double>& x, int64_t rows, int64_t cols, std::vector<double>* sm,
                std::vector<double>* lsm) {
  sm->resize(x.size());
  lsm->resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[static_cast<size_t>(r * cols + c)]);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[static_cast<size_t>(r * cols + c)] - m);
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      (*lsm)[i] = x[i] - m - std::log(s);
      (*sm)[i] = std::exp((*lsm)[i]);
    }
  }
}

TEST(Softmax, MatchesReferenceIncludingLargeLogits) {
  const int64_t rows = 4, cols = 6;
  std::vector<double> x = RandomValues(rows * cols, 8);
  x[0] = 1000;
  x[7] = -1000;
  x[12] = 1000;
  x[13] = 1000;
  std::vector<double> sm, lsm;
  RefSoftmax(x, rows, cols, &sm, &lsm);
  const TensorShape s({rows, cols});
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, RunOp("Softmax", {Make(dt, x, s)}));
    EXPECT_TENSOR_NEAR(Make(dt, sm, s), a[0], 1e-5);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, RunOp("LogSoftmax", {Make(dt, x, s)}));
    EXPECT_TENSOR_NEAR(Make(dt, lsm, s), b[0], 1e-4);
  }
}

TEST(SoftmaxCrossEntropyWithLogits, MatchesReference) {
  const int64_t rows = 5, cols = 4;
  std::vector<double> x = RandomValues(rows * cols, 9);
  x[1] = 1000;  // large logits stay finite
  x[6] = -1000;
  std::vector<double> labels = RandomValues(rows * cols, 10, 0, 1);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += labels[static_cast<size_t>(r * cols + c)];
    for (int64_t c = 0; c < cols; ++c) labels[static_cast<size_t>(r * cols + c)] /= s;
  }
  std::vector<double> sm, lsm;
  RefSoftmax(x, rows, cols, &sm, &lsm);
  std::vector<double> loss(static_cast<size_t>(rows), 0.0), back(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    loss[i / cols] -= labels[i] * lsm[i];
    back[i] = sm[i] - labels[i];
  }
  const TensorShape s({rows, cols});
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out,
                            RunOp("SoftmaxCrossEntropyWithLogits", {Make(dt, x, s), Make(dt, labels, s)}));
    EXPECT_TENSOR_NEAR(Make(dt, loss, TensorShape({rows})), out[0], 1e-4);
    EXPECT_TENSOR_NEAR(Make(dt, back, s), out[1], 1e-5);
  }
  EXPECT_FALSE(RunOp("SoftmaxCrossEntropyWithLogits",
                     {Make(DT_FLOAT, x, s), Make(DT_FLOAT, RandomValues(8, 1), TensorShape({2, 4}))})
                   .ok());
}

TEST(SparseSoftmaxCrossEntropyWithLogits, MatchesReferenceForBothLabelTypes) {
  const int64_t rows = 3, cols = 5;
  std::vector<double> x = RandomValues(rows * cols, 11);
  x[2] = 1000;
  const std::vector<int64_t> labels = {2, 0, 4};
  std::vector<double> sm, lsm;
  RefSoftmax(x, rows, cols, &sm, &lsm);
  std::vector<double> loss(3), back = sm;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t i = static_cast<size_t>(r * cols + labels[static_cast<size_t>(r)]);
    loss[static_cast<size_t>(r)] = -lsm[i];
    back[i] -= 1;
  }
  const TensorShape s({rows, cols});
  for (const Tensor& l : {Tensor::FromVector<int64_t>(labels), Tensor::FromVector<int32_t>({2, 0, 4})}) {
    OpTest t("SparseSoftmaxCrossEntropyWithLogits");
    t.Input(Make(DT_FLOAT, x, s)).Input(l);
    SetAttrType(t.def(), "Tlabels", l.dtype());
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_TENSOR_NEAR(Make(DT_FLOAT, loss, TensorShape({rows})), out[0], 1e-4);
    EXPECT_TENSOR_NEAR(Make(DT_FLOAT, back, s), out[1], 1e-5);
  }
}

TEST(SparseSoftmaxCrossEntropyWithLogits, BadLabelNamesTheValue) {
  OpTest t("SparseSoftmaxCrossEntropyWithLogits");
  t.Input(Make(DT_FLOAT, RandomValues(6, 1), TensorShape({2, 3}))).Input(Tensor::FromVector<int64_t>({1, 7}));
  EXPECT_ERROR_CONTAINS(t.Run(), "7");
  OpTest n("SparseSoftmaxCrossEntropyWithLogits");
  n.Input(Make(DT_FLOAT, RandomValues(6, 1), TensorShape({2, 3}))).Input(Tensor::FromVector<int64_t>({-1, 0}));
  EXPECT_ERROR_CONTAINS(n.Run(), "-1");
}

TEST(L2Loss, HalfSumOfSquares) {
  const std::vector<double> x = RandomValues(10000, 12);
  double ref = 0;
  for (double v : x) ref += v * v;
  ref /= 2;
  for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, RunOp("L2Loss", {Make(dt, x, TensorShape({100, 100}))}, 2));
    EXPECT_TENSOR_NEAR(Make(dt, {ref}, TensorShape()), out[0], 1e-5);
  }
}

absl::StatusOr<std::vector<Tensor>> RunDropout(const Tensor& x, double keep, int64_t seed) {
  OpTest t("Dropout");
  t.Input(x).Input(Tensor::Scalar<float>(static_cast<float>(keep)));
  SetAttrInt(t.def(), "seed", seed);
  return t.Run();
}

TEST(Dropout, ReproducibleWithSeedAndMaskStatistics) {
  const TensorShape s({100, 100});
  const Tensor x = Make(DT_FLOAT, RandomValues(s.num_elements(), 13), s);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, RunDropout(x, 0.7, 42));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, RunDropout(x, 0.7, 42));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> c, RunDropout(x, 0.7, 43));
  EXPECT_TENSOR_EQ(a[0], b[0]);
  EXPECT_TENSOR_EQ(a[1], b[1]);
  EXPECT_FALSE(::distflow::test::TensorEqual(a[1], c[1]));
  int64_t kept = 0;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const float m = a[1].flat<float>()[i];
    ASSERT_TRUE(m == 0.0f || std::fabs(m - 1.0f / 0.7f) < 1e-6f) << m;
    if (m != 0) ++kept;
    EXPECT_FLOAT_EQ(a[0].flat<float>()[i], x.flat<float>()[i] * m);
  }
  EXPECT_NEAR(static_cast<double>(kept) / x.NumElements(), 0.7, 0.02);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> all, RunDropout(x, 1.0, 1));
  EXPECT_TENSOR_EQ(x, all[0]);
}

TEST(Dropout, KeepProbOutOfRangeFails) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 3});
  EXPECT_ERROR_CONTAINS(RunDropout(x, 0.0, 1), "keep_prob");
  EXPECT_ERROR_CONTAINS(RunDropout(x, 1.5, 1), "keep_prob");
}

}  // namespace
}  // namespace distflow
