// Optimizers on IndexedSlices gradients (Gather of a table): the update is a
// sparse kernel (ScatterSub, SparseApply*), and after two steps with
// different ids it matches the dense step of the same loss written with
// one-hot matrices: on every row for GradientDescent, Adagrad and exact Adam;
// on the rows of the last step for Momentum and lazy Adam, whose other rows
// stay bit-identical (they are not touched).
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distflow/distflow.h"
#include "distflow/gradients.h"
#include "distflow/train/optimizer.h"
#include "gtest/gtest.h"
#include "proto/graph.pb.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

constexpr int kRows = 6, kCols = 3;

Tensor Table() {
  Tensor t(DT_DOUBLE, TensorShape({kRows, kCols}));
  auto f = t.flat<double>();
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.1 * static_cast<double>((i * 7) % 11) - 0.4;
  return t;
}

bool GraphHasOp(const Scope& root, const std::string& op) {
  proto::GraphDef g;
  root.ToGraphDef(&g);
  for (const auto& n : g.node()) {
    if (n.op() == op) return true;
  }
  return false;
}

struct Result {
  Tensor sparse, dense, after_first;
};

// Trains a sparse and a dense copy of one table with optimizers from `make`
// for two steps (ids {4, 1, 4}, then {1, 5}).
Result Train(const std::function<std::unique_ptr<Optimizer>()>& make, const std::string& sparse_op) {
  Scope root = Scope::NewRootScope();
  Output ps = ops::MakeVariable(root.WithOpName("sparse"), ops::Const(root, Table()));
  Output pd = ops::MakeVariable(root.WithOpName("dense"), ops::Const(root, Table()));
  Output ids = ops::Placeholder(root, DT_INT32, PartialShape({-1}));
  Output w = ops::Placeholder(root, DT_DOUBLE, PartialShape({-1, kCols}));
  Output one_hot = ops::OneHot(root, ids, kRows, ops::Const(root, 1.0), ops::Const(root, 0.0));
  Output loss_s = ops::Sum(root, ops::Square(root, w * ops::Gather(root, ps, ids)), {0, 1});
  Output loss_d = ops::Sum(root, ops::Square(root, w * ops::MatMul(root, one_hot, pd)), {0, 1});
  std::unique_ptr<Optimizer> os = make(), od = make();
  absl::StatusOr<Operation> ts = os->Minimize(root, loss_s, nullptr, {ps});
  absl::StatusOr<Operation> td = od->Minimize(root, loss_d, nullptr, {pd});
  EXPECT_TRUE(ts.ok()) << ts.status();
  EXPECT_TRUE(td.ok()) << td.status();
  EXPECT_TRUE(GraphHasOp(root, sparse_op)) << sparse_op;
  Session sess;
  EXPECT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  Result r;
  const std::vector<std::vector<int32_t>> steps = {{4, 1, 4}, {1, 5}};
  for (size_t k = 0; k < steps.size(); ++k) {
    const int n = static_cast<int>(steps[k].size());
    std::vector<double> wv;
    for (int i = 0; i < n * kCols; ++i) wv.push_back(0.5 + 0.25 * i);
    Tensor wt = Tensor::FromVector<double>(wv, TensorShape({n, kCols}));
    auto out = sess.Run({{ids, Tensor::FromVector<int32_t>(steps[k])}, {w, wt}}, {}, {*ts, *td});
    EXPECT_TRUE(out.ok()) << out.status();
    if (k == 0) r.after_first = (*sess.Run({ps}))[0];
  }
  auto out = sess.Run({ps, pd});
  EXPECT_TRUE(out.ok()) << out.status();
  r.sparse = (*out)[0];
  r.dense = (*out)[1];
  return r;
}

Tensor Row(const Tensor& t, int r) { return t.Slice(r, r + 1); }

void ExpectRowsMatchDense(const Result& r, const std::vector<int>& rows) {
  for (int row : rows) {
    SCOPED_TRACE(row);
    EXPECT_TENSOR_NEAR(Row(r.dense, row), Row(r.sparse, row), 1e-6);
  }
}

void ExpectRowsUnchanged(const Tensor& before, const Tensor& after, const std::vector<int>& rows) {
  for (int row : rows) {
    SCOPED_TRACE(row);
    EXPECT_TENSOR_EQ(Row(before, row), Row(after, row));  // bit-identical
  }
}

TEST(SparseOptimizer, GradientDescentScatterSubMatchesDense) {
  Result r = Train([] { return std::make_unique<GradientDescentOptimizer>(0.1); }, "ScatterSub");
  ExpectRowsMatchDense(r, {0, 1, 2, 3, 4, 5});
  ExpectRowsUnchanged(Table(), r.sparse, {0, 2, 3});
}

TEST(SparseOptimizer, AdagradMatchesDenseAndLeavesOtherRowsBitIdentical) {
  Result r = Train([] { return std::make_unique<AdagradOptimizer>(0.3); }, "SparseApplyAdagrad");
  ExpectRowsMatchDense(r, {0, 1, 2, 3, 4, 5});
  ExpectRowsUnchanged(Table(), r.sparse, {0, 2, 3});
  EXPECT_FALSE(test::TensorEqual(Row(Table(), 5), Row(r.sparse, 5)));  // a touched row moved
}

TEST(SparseOptimizer, ExactAdamMatchesDenseOnEveryRow) {
  Result r = Train([] { return std::make_unique<AdamOptimizer>(0.1); }, "SparseApplyAdam");
  ExpectRowsMatchDense(r, {0, 1, 2, 3, 4, 5});
  // Row 4 was looked up in step 1 only: exact Adam still moves it in step 2.
  EXPECT_FALSE(test::TensorEqual(Row(r.after_first, 4), Row(r.sparse, 4)));
}

TEST(SparseOptimizer, LazyAdamMovesOnlyLookedUpRows) {
  Result r = Train(
      [] {
        auto adam = std::make_unique<AdamOptimizer>(0.1);
        adam->SetLazySparseUpdates(true);
        return adam;
      },
      "SparseApplyAdam");
  ExpectRowsMatchDense(r, {1, 5});
  ExpectRowsUnchanged(r.after_first, r.sparse, {0, 2, 3, 4});
  EXPECT_FALSE(test::TensorEqual(Row(r.dense, 4), Row(r.sparse, 4)));  // dense Adam moved row 4 again
}

TEST(SparseOptimizer, MomentumUpdatesTouchedRowsLikeDense) {
  Result r = Train([] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); }, "SparseApplyMomentum");
  ExpectRowsMatchDense(r, {1, 5});
  ExpectRowsUnchanged(r.after_first, r.sparse, {0, 2, 3, 4});
}

// The update is gated on the gradient's parts, not on its dense form: a
// traced step runs no table-sized UnsortedSegmentSum, only the sparse update.
TEST(SparseOptimizer, ASparseStepNeverComputesTheDenseGradient) {
  Scope root = Scope::NewRootScope();
  Output table = ops::MakeVariable(root.WithOpName("table"), ops::Const(root, Table()));
  Output ids = ops::Const(root, Tensor::FromVector<int32_t>({4, 1, 4}));
  Output loss = ops::Sum(root, ops::Square(root, ops::Gather(root, table, ids)), {0, 1});
  for (const char* kind : {"plain", "Adagrad"}) {
    SCOPED_TRACE(kind);
    std::unique_ptr<Optimizer> opt;
    if (std::string(kind) == "plain") {
      opt = std::make_unique<GradientDescentOptimizer>(0.1);
    } else {
      opt = std::make_unique<AdagradOptimizer>(0.1);
    }
    absl::StatusOr<Operation> train = opt->Minimize(root, loss);
    ASSERT_TRUE(train.ok()) << train.status();
    Session sess;
    ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
    StepStats stats;
    RunOptions options;
    options.trace = &stats;
    ASSERT_TRUE(sess.Run({}, {}, {*train}, options).ok());
    int ran = 0;
    for (const DeviceStepStats& d : stats.devices) {
      for (const NodeExecStats& n : d.nodes) {
        EXPECT_NE(n.op, "UnsortedSegmentSum") << n.node << " (the dense form of the gradient) ran";
        ++ran;
      }
    }
    EXPECT_GT(ran, 0);
  }
}

// FTRL's dense step recomputes every row from its `linear` (a row with zero
// gradient becomes what its linear gives, 0 at first), so the sparse update
// equals the dense one on the rows looked up in every step where they moved
// (1 in both steps, 4 in the first), and leaves the others bit-identical, as
// TF's sparse FTRL does.
TEST(SparseOptimizer, FtrlOptimizerUpdatesTouchedRowsLikeDense) {
  Result r = Train([] { return std::make_unique<FtrlOptimizer>(0.3, -0.5, 0.1, 0.01, 0.02); }, "SparseApplyFtrl");
  ExpectRowsMatchDense(r, {1, 4});
  ExpectRowsUnchanged(Table(), r.sparse, {0, 2, 3});
  EXPECT_FALSE(test::TensorEqual(Row(Table(), 5), Row(r.sparse, 5)));  // touched in step 2: moved
}

// ApplyFtrl (dense) is SparseApplyFtrl applied to every row, element for
// element; FtrlOptimizer's slots have TF's names; bad hyperparameters are
// errors naming them.
TEST(SparseOptimizer, DenseFtrlIsTheSparseKernelOnEveryRow) {
  Scope root = Scope::NewRootScope();
  const Tensor var0 = Tensor::FromVector<double>({0.5, -0.2, 0.1, 0.3, -0.4, 0.05}, TensorShape({3, 2}));
  const Tensor lin0 = Tensor::FromVector<double>({0.0, 0.2, -0.1, 0.0, 0.3, -0.3}, TensorShape({3, 2}));
  const Tensor acc0 = Tensor::FromVector<double>({0.1, 0.2, 0.3, 0.1, 0.2, 0.3}, TensorShape({3, 2}));
  const Tensor g = Tensor::FromVector<double>({0.3, -0.6, 0.2, 0.1, -0.5, 0.4}, TensorShape({3, 2}));
  std::vector<Output> vars;
  for (const char* copy : {"d", "s"}) {
    for (const auto& [name, value] : {std::pair{"var", var0}, std::pair{"accum", acc0}, std::pair{"linear", lin0}}) {
      vars.push_back(ops::MakeVariable(root.WithOpName(std::string(copy) + name), ops::Const(root, value)));
    }
  }
  auto scalars = [&] {
    return std::vector<Output>{ops::Const(root, 0.2), ops::Const(root, 0.05), ops::Const(root, 0.1),
                               ops::Const(root, -0.5)};
  };
  std::vector<Output> dense_in = {vars[0], vars[1], vars[2], ops::Const(root, g)};
  for (const Output& x : scalars()) dense_in.push_back(x);
  std::vector<Output> sparse_in = {vars[3], vars[4], vars[5], ops::Const(root, g),
                                   ops::Const(root, Tensor::FromVector<int32_t>({0, 1, 2}))};
  for (const Output& x : scalars()) sparse_in.push_back(x);
  Operation dense = ops::Raw(root, "ApplyFtrl", dense_in);
  Operation sparse = ops::Raw(root, "SparseApplyFtrl", sparse_in);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(sess.Run({}, {}, {dense, sparse}).ok());
  auto out = sess.Run(vars);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int k = 0; k < 3; ++k) EXPECT_TENSOR_EQ((*out)[static_cast<size_t>(k)], (*out)[static_cast<size_t>(k + 3)]);
  EXPECT_FALSE(test::TensorEqual(var0, (*out)[0]));

  Scope named = Scope::NewRootScope();
  Output w = ops::MakeVariable(named.WithOpName("w"), ops::Const(named, Tensor::FromVector<float>({1, 2})));
  FtrlOptimizer ftrl(0.1);
  ASSERT_TRUE(ftrl.Minimize(named, ops::Sum(named, ops::Square(named, w), {0})).ok());
  EXPECT_EQ(ftrl.GetSlot(w, "accum").op().name(), "w/Ftrl");
  EXPECT_EQ(ftrl.GetSlot(w, "linear").op().name(), "w/Ftrl_1");
  auto bad = FtrlOptimizer::Create(0.1, 0.5);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("learning_rate_power = 0.5 must be <= 0"), std::string::npos) << bad.status();
  EXPECT_FALSE(FtrlOptimizer::Create(0.1, -0.5, 0.0).ok());
  EXPECT_FALSE(FtrlOptimizer::Create(0.1, -0.5, 0.1, -1.0).ok());
}

// With l2_shrinkage a dense step moves every row (linear takes 2 * l2_shrinkage
// * var even where the gradient is 0) and the sparse one, as TF's
// SparseApplyFtrlV2, only the looked-up rows: row 1 (looked up in both
// steps) matches the dense step, row 4 (only in the first) does not.
TEST(SparseOptimizer, FtrlWithL2ShrinkageUpdatesTouchedRowsLikeDense) {
  Result r = Train([] { return std::make_unique<FtrlOptimizer>(0.3, -0.5, 0.1, 0.01, 0.02, "Ftrl", 0.05); },
                   "SparseApplyFtrlV2");
  ExpectRowsMatchDense(r, {1});
  ExpectRowsUnchanged(Table(), r.sparse, {0, 2, 3});
  EXPECT_FALSE(test::TensorNear(Row(r.dense, 4), Row(r.sparse, 4), 1e-9, 1e-9));
  EXPECT_FALSE(test::TensorNear(Row(r.dense, 0), Row(Table(), 0), 1e-9, 1e-9));  // dense: shrunk without a gradient
  EXPECT_FALSE(FtrlOptimizer::Create(0.1, -0.5, 0.1, 0.0, 0.0, -0.5).ok());
}

// ApplyFtrlV2 (every element) and SparseApplyFtrlV2 (rows {2, 0, 2},
// duplicates summed) against TF's formula with l2_shrinkage, in float64:
// linear takes grad + 2 * l2_shrinkage * var, accum takes grad^2.
TEST(SparseOptimizer, FtrlV2KernelsMatchTheFormula) {
  Scope root = Scope::NewRootScope();
  const std::vector<double> v0 = {0.5, -0.2, 0.1, 0.3, -0.4, 0.05}, lin0 = {0.0, 0.2, -0.1, 0.0, 0.3, -0.3};
  const std::vector<double> g = {0.3, -0.6, 0.2, 0.1, -0.5, 0.4};
  const double lr = 0.2, l1 = 0.05, l2 = 0.1, shrink = 0.3, lr_power = -0.5;
  auto make = [&](const std::string& prefix) {
    return std::vector<Output>{
        ops::MakeVariable(root.WithOpName(prefix + "var"), ops::Const(root, Tensor::FromVector<double>(v0, {3, 2}))),
        ops::MakeVariable(root.WithOpName(prefix + "accum"),
                          ops::Const(root, Tensor::FromVector<double>(std::vector<double>(6, 0.1), {3, 2}))),
        ops::MakeVariable(root.WithOpName(prefix + "linear"),
                          ops::Const(root, Tensor::FromVector<double>(lin0, {3, 2})))};
  };
  std::vector<Output> d = make("d"), s = make("s");
  Output grad = ops::Const(root, Tensor::FromVector<double>(g, {3, 2}));
  Operation dense = ops::Raw(root, "ApplyFtrlV2",
                             {d[0], d[1], d[2], grad, ops::Const(root, lr), ops::Const(root, l1), ops::Const(root, l2),
                              ops::Const(root, shrink), ops::Const(root, lr_power)});
  Operation sparse =
      ops::Raw(root, "SparseApplyFtrlV2",
               {s[0], s[1], s[2], grad, ops::Const(root, Tensor::FromVector<int64_t>({2, 0, 2})), ops::Const(root, lr),
                ops::Const(root, l1), ops::Const(root, l2), ops::Const(root, shrink), ops::Const(root, lr_power)});
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {dense, sparse}).ok());
  auto out = sess.Run({d[0], d[1], d[2], s[0], s[1], s[2]});
  ASSERT_TRUE(out.ok()) << out.status();
  // One element of TF's FtrlV2 update.
  auto step = [&](double* v, double* a, double* lin, double grad_k) {
    const double na = *a + grad_k * grad_k;
    *lin += grad_k + 2 * shrink * *v - (std::pow(na, -lr_power) - std::pow(*a, -lr_power)) / lr * *v;
    const double quad = std::pow(na, -lr_power) / lr + 2 * l2;
    *v = std::fabs(*lin) > l1 ? ((*lin > 0 ? l1 : -l1) - *lin) / quad : 0.0;
    *a = na;
  };
  std::vector<double> dv = v0, da(6, 0.1), dl = lin0, sv = v0, sa(6, 0.1), sl = lin0;
  for (int k = 0; k < 6; ++k) step(&dv[k], &da[k], &dl[k], g[k]);
  const std::vector<std::pair<int, std::vector<double>>> rows = {{2, {g[0] + g[4], g[1] + g[5]}}, {0, {g[2], g[3]}}};
  for (const auto& [row, gr] : rows) {
    for (int j = 0; j < 2; ++j) step(&sv[row * 2 + j], &sa[row * 2 + j], &sl[row * 2 + j], gr[j]);
  }
  const std::vector<std::vector<double>> want = {dv, da, dl, sv, sa, sl};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TENSOR_NEAR(Tensor::FromVector<double>(want[i], {3, 2}), (*out)[i], 1e-12) << "output " << i;
  }
  EXPECT_TENSOR_EQ(Row(Tensor::FromVector<double>(v0, {3, 2}), 1), Row((*out)[3], 1));  // untouched, bit-identical
}

// SparseApplyFtrl on rows {2, 0, 2} against TF's FTRL-Proximal formula
// written out here in float64 (duplicate ids summed first); row 1 untouched.
TEST(SparseOptimizer, FtrlKernelMatchesTheFormulaOnTouchedRows) {
  Scope root = Scope::NewRootScope();
  const Tensor var0 = Tensor::FromVector<double>({0.5, -0.2, 0.1, 0.3, -0.4, 0.05}, TensorShape({3, 2}));
  Output var = ops::MakeVariable(root.WithOpName("var"), ops::Const(root, var0));
  Output accum = ops::MakeVariable(
      root.WithOpName("accum"),
      ops::Const(root, Tensor::FromVector<double>({0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, TensorShape({3, 2}))));
  Output linear = ops::MakeVariable(
      root.WithOpName("linear"),
      ops::Const(root, Tensor::FromVector<double>({0.0, 0.2, -0.1, 0.0, 0.3, -0.3}, TensorShape({3, 2}))));
  const std::vector<double> g = {0.3, -0.6, 0.2, 0.1, -0.5, 0.4};
  const double lr = 0.2, l1 = 0.05, l2 = 0.1, lr_power = -0.5;
  Operation ftrl = ops::Raw(root, "SparseApplyFtrl",
                            {var, accum, linear, ops::Const(root, Tensor::FromVector<double>(g, TensorShape({3, 2}))),
                             ops::Const(root, Tensor::FromVector<int32_t>({2, 0, 2})), ops::Const(root, lr),
                             ops::Const(root, l1), ops::Const(root, l2), ops::Const(root, lr_power)});
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {ftrl}).ok());
  auto out = sess.Run({var, accum, linear});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> v(var0.flat<double>().begin(), var0.flat<double>().end()), a(6, 0.1);
  std::vector<double> lin = {0.0, 0.2, -0.1, 0.0, 0.3, -0.3};
  const std::vector<std::pair<int, std::vector<double>>> rows = {{2, {g[0] + g[4], g[1] + g[5]}}, {0, {g[2], g[3]}}};
  for (const auto& [row, grad] : rows) {
    for (int j = 0; j < 2; ++j) {
      const int k = row * 2 + j;
      const double na = a[k] + grad[j] * grad[j];
      lin[k] += grad[j] - (std::pow(na, -lr_power) - std::pow(a[k], -lr_power)) / lr * v[k];
      const double quad = std::pow(na, -lr_power) / lr + 2 * l2;
      v[k] = std::fabs(lin[k]) > l1 ? ((lin[k] > 0 ? l1 : -l1) - lin[k]) / quad : 0.0;
      a[k] = na;
    }
  }
  EXPECT_TENSOR_NEAR(Tensor::FromVector<double>(v, TensorShape({3, 2})), (*out)[0], 1e-12);
  EXPECT_TENSOR_NEAR(Tensor::FromVector<double>(a, TensorShape({3, 2})), (*out)[1], 1e-12);
  EXPECT_TENSOR_NEAR(Tensor::FromVector<double>(lin, TensorShape({3, 2})), (*out)[2], 1e-12);
  EXPECT_TENSOR_EQ(Row(var0, 1), Row((*out)[0], 1));  // untouched, bit-identical
  // A bad id fails naming the op and the id, and changes nothing.
  Operation bad =
      ops::Raw(root, "SparseApplyFtrl",
               {var, accum, linear, ops::Const(root, Tensor::FromVector<double>({1, 1}, TensorShape({1, 2}))),
                ops::Const(root, Tensor::FromVector<int64_t>({3})), ops::Const(root, lr), ops::Const(root, l1),
                ops::Const(root, l2), ops::Const(root, lr_power)});
  auto failed = sess.Run({}, {}, {bad});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("SparseApplyFtrl"), std::string::npos) << failed.status();
  EXPECT_NE(failed.status().message().find("indices[0] = 3 is not in [0, 3)"), std::string::npos) << failed.status();
  auto again = sess.Run({var});
  ASSERT_TRUE(again.ok());
  EXPECT_TENSOR_EQ((*out)[0], (*again)[0]);
}

}  // namespace
}  // namespace distflow
