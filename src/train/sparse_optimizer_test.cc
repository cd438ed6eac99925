// Optimizers on IndexedSlices gradients (Gather of a table): the update is a
// sparse kernel (ScatterSub, SparseApply*), and after two steps with
// different ids it matches the dense step of the same loss written with
// one-hot matrices: on every row for GradientDescent, Adagrad and exact Adam;
// on the rows of the last step for Momentum and lazy Adam, whose other rows
// stay bit-identical (they are not touched).
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

}  // namespace
}  // namespace distflow
