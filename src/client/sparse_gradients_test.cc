// The sparse ops through the client: numeric gradient checks (float64) of
// Gather, GatherV2, UnsortedSegmentSum, DynamicPartition/Stitch and
// SparseSegmentSum/Mean; IndexedSlices gradients (Gather's gradient is
// sparse, several are concatenated, and the values equal the dense
// gradient's); Scatter* updates of a variable, and a bad id that leaves the
// variable untouched.
#include <string>
#include <vector>

#include "client/gradient_test_util.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "gtest/gtest.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using namespace grad_test;  // NOLINT: the shared gradient-test helpers

void Check(const std::vector<Tensor>& values, const Builder& f, const std::string& what) {
  CheckGradient(values, f, what, kTol, /*require_gradient=*/true);
}

Output Ids(const Scope& s, std::vector<int32_t> v, TensorShape shape) {
  return ops::Const(s, Tensor::FromVector<int32_t>(v, shape));
}
Output Ids(const Scope& s, std::vector<int32_t> v) { return ops::Const(s, Tensor::FromVector<int32_t>(v)); }

TEST(SparseGradientCheck, GatherAlongEveryAxis) {
  Check(
      {Random(S({4, 3}), -1, 1, 1)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Gather(s, x[0], Ids(s, {3, 0, 3, 1}, TensorShape({2, 2})));
      },
      "Gather axis 0, duplicate ids");
  Check(
      {Random(S({2, 3, 2}), -1, 1, 2)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Gather(s, x[0], Ids(s, {2, 0, 2}), 1);
      },
      "GatherV2 axis 1");
  Check(
      {Random(S({2, 3, 2}), -1, 1, 3)},
      [](const Scope& s, const std::vector<Output>& x) { return ops::Gather(s, x[0], Ids(s, {1}), 2); },
      "GatherV2 axis 2");
}

TEST(SparseGradientCheck, SegmentsPartitionAndStitch) {
  Check(
      {Random(S({4, 2}), -1, 1, 4)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::UnsortedSegmentSum(s, x[0], Ids(s, {2, -1, 0, 2}), ops::Const(s, 3));
      },
      "UnsortedSegmentSum");
  Check(
      {Random(S({5, 2}), -1, 1, 5)},
      [](const Scope& s, const std::vector<Output>& x) {
        std::vector<Output> p = ops::DynamicPartition(s, x[0], Ids(s, {1, 0, 1, 1, 0}), 2);
        return ops::Concat(s, {p[0], ops::Square(s, p[1])}, 0);
      },
      "DynamicPartition");
  Check(
      {Random(S({2, 2}), -1, 1, 6), Random(S({3, 2}), -1, 1, 7)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::DynamicStitch(s, {Ids(s, {1, 4}), Ids(s, {0, 2, 3})}, {x[0], x[1]});
      },
      "DynamicStitch");
  Check(
      {Random(S({5, 2}), -1, 1, 8)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::SparseSegmentSum(s, x[0], Ids(s, {4, 0, 4, 2}), Ids(s, {0, 0, 2, 2}));
      },
      "SparseSegmentSum");
  Check(
      {Random(S({5, 2}), -1, 1, 9)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::SparseSegmentMean(s, x[0], Ids(s, {4, 0, 4, 2, 1}), Ids(s, {0, 0, 2, 2, 2}));
      },
      "SparseSegmentMean");
}

Output Raw1(const Scope& s, const std::string& op, const std::vector<Output>& in) {
  return Output(ops::Raw(s, op, in), 0, s);
}

// Where indices repeat, DynamicStitch's output holds the value written last
// (later inputs, and later positions in one input, overwrite earlier ones):
// only that value gets the gradient; the values it overwrote get zero.
TEST(SparseGradientCheck, DynamicStitchWithRepeatedIndicesGivesTheLastWriterTheGradient) {
  Check(
      {Random(S({3, 2}), -1, 1, 10), Random(S({2, 2}), -1, 1, 11)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Square(s, ops::DynamicStitch(s, {Ids(s, {1, 0, 1}), Ids(s, {2, 0})}, {x[0], x[1]}));
      },
      "DynamicStitch with repeated indices");
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, Tensor::FromVector<float>({1, 2, 3}));
  Output b = ops::Const(root, Tensor::FromVector<float>({4, 5}));
  Output stitched = ops::DynamicStitch(root, {Ids(root, {1, 0, 1}), Ids(root, {2, 0})}, {a, b});  // [5, 3, 4]
  Output weights = ops::Const(root, Tensor::FromVector<float>({10, 20, 30}));
  auto grads = Gradients(root, {ops::Sum(root, ops::Mul(root, stitched, weights), {0})}, {a, b});
  ASSERT_TRUE(grads.ok()) << grads.status();
  Session sess;
  auto out = sess.Run({(*grads)[0], (*grads)[1], stitched});
  ASSERT_TRUE(out.ok()) << out.status();
  // a[0] (row 1) is overwritten by a[2]; a[1] (row 0) by b[1].
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({5, 3, 4}), (*out)[2]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 0, 20}), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({30, 10}), (*out)[1]);
}

TEST(SparseGradientCheck, GatherNdAndScatterNd) {
  // Tuples of full length (elements), of length 1 (rows) and repeated.
  Check(
      {Random(S({3, 4}), -1, 1, 20)},
      [](const Scope& s, const std::vector<Output>& x) {
        return Raw1(s, "GatherNd", {x[0], Ids(s, {2, 1, 0, 3, 2, 1}, TensorShape({3, 2}))});
      },
      "GatherNd elements");
  Check(
      {Random(S({3, 2, 2}), -1, 1, 21)},
      [](const Scope& s, const std::vector<Output>& x) {
        return Raw1(s, "GatherNd", {x[0], Ids(s, {2, 0, 2}, TensorShape({3, 1}))});
      },
      "GatherNd rows");
  Check(
      {Random(S({3, 2}), -1, 1, 22)},
      [](const Scope& s, const std::vector<Output>& x) {
        return Raw1(s, "ScatterNd", {Ids(s, {1, 3, 1}, TensorShape({3, 1})), x[0], Ids(s, {4, 2})});
      },
      "ScatterNd");
}

// Values as NumPy gives them: p[tuple(idx.T)] and np.add.at; a bad tuple is
// an error naming the op, the tuple and the shape.
TEST(GatherNd, MatchesNumpyAndRejectsBadTuples) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Const(root, Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, TensorShape({3, 4})));
  Output elems = Raw1(root, "GatherNd", {p, Ids(root, {2, 1, 0, 3}, TensorShape({2, 2}))});
  Output rows = Raw1(root, "GatherNd", {p, ops::Const(root, Tensor::FromVector<int64_t>({2, 0}, TensorShape({2, 1})))});
  Output scattered = Raw1(root, "ScatterNd",
                          {Ids(root, {1, 3, 1}, TensorShape({3, 1})),
                           ops::Const(root, Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}))), Ids(root, {5})});
  Output bad = Raw1(root, "GatherNd", {p, Ids(root, {0, 0, 1, 4}, TensorShape({2, 2}))});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(elems.shape().DebugString(), PartialShape({2}).DebugString());
  EXPECT_EQ(rows.shape().DebugString(), PartialShape({2, 4}).DebugString());
  Session sess;
  auto out = sess.Run({elems, rows, scattered});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({9, 3}), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({8, 9, 10, 11, 0, 1, 2, 3}, TensorShape({2, 4})), (*out)[1]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 4, 0, 2, 0}), (*out)[2]);
  auto failed = sess.Run({bad});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("GatherNd"), std::string::npos) << failed.status();
  EXPECT_NE(failed.status().message().find("index tuple 1 = [1, 4] is out of bounds"), std::string::npos)
      << failed.status();
  EXPECT_NE(failed.status().message().find("for shape [3, 4]"), std::string::npos) << failed.status();
}

// loss = sum(w * gather(p, a)) + sum(gather(p, b)^2): the gradient of p is
// sparse (two IndexedSlices concatenated) and equals the gradient of the
// same loss written densely with one-hot matrices.
TEST(IndexedSlicesGradient, GatherGradientIsSparseAndEqualsDense) {
  Scope root = Scope::NewRootScope();
  const Tensor p_value = Random(S({6, 3}), -1, 1, 10);
  const Tensor w_value = Random(S({4, 3}), -1, 1, 11);
  Output p = ops::Placeholder(root, DT_DOUBLE, PartialShape({6, 3}));
  Output w = ops::Const(root, w_value);
  const std::vector<int32_t> a = {5, 0, 5, 2}, b = {2, 3};
  Output sparse_loss = ops::Sum(root, w * ops::Gather(root, p, Ids(root, a)), {0, 1}) +
                       ops::Sum(root, ops::Square(root, ops::Gather(root, p, Ids(root, b))), {0, 1});
  auto one_hot = [&](const std::vector<int32_t>& ids) {
    return ops::OneHot(root, Ids(root, ids), 6, ops::Const(root, 1.0), ops::Const(root, 0.0));
  };
  Output dense_loss = ops::Sum(root, w * ops::MatMul(root, one_hot(a), p), {0, 1}) +
                      ops::Sum(root, ops::Square(root, ops::MatMul(root, one_hot(b), p)), {0, 1});
  absl::StatusOr<std::vector<Output>> gs = Gradients(root, {sparse_loss}, {p});
  absl::StatusOr<std::vector<Output>> gd = Gradients(root, {dense_loss}, {p});
  ASSERT_TRUE(gs.ok()) << gs.status();
  ASSERT_TRUE(gd.ok()) << gd.status();
  IndexedSlices slices;
  ASSERT_TRUE(AsIndexedSlices((*gs)[0], &slices)) << (*gs)[0].name();
  IndexedSlices dense_parts;
  EXPECT_FALSE(AsIndexedSlices((*gd)[0], &dense_parts));
  Session sess;
  auto out = sess.Run({{p, p_value}}, {(*gs)[0], (*gd)[0], slices.values, slices.indices, slices.num_rows}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_NEAR((*out)[1], (*out)[0], 1e-6);
  EXPECT_EQ((*out)[2].shape(), TensorShape({6, 3}));  // 4 + 2 rows, concatenated
  EXPECT_EQ((*out)[3].NumElements(), 6);
  EXPECT_EQ((*out)[4].scalar<int64_t>(), 6);
}

TEST(IndexedSlicesGradient, MixedWithDenseIsSummedDensely) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root, DT_DOUBLE, PartialShape({3, 2}));
  Output loss = ops::Sum(root, ops::Gather(root, p, Ids(root, {1})), {0, 1}) + ops::Sum(root, p, {0, 1});
  absl::StatusOr<std::vector<Output>> g = Gradients(root, {loss}, {p});
  ASSERT_TRUE(g.ok()) << g.status();
  IndexedSlices slices;
  EXPECT_FALSE(AsIndexedSlices((*g)[0], &slices));
  Session sess;
  auto out = sess.Run({{p, Tensor(DT_DOUBLE, TensorShape({3, 2}))}}, {(*g)[0]}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<double>({1, 1, 2, 2, 1, 1}, TensorShape({3, 2})), (*out)[0]);
}

TEST(ScatterOps, AddSubUpdateRowsInPlaceAndRejectBadIds) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Variable(root.WithOpName("table"), PartialShape({4, 2}), DT_FLOAT);
  Output init =
      ops::Assign(root, v, ops::Const(root, Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7}, TensorShape({4, 2}))));
  Output ones = ops::Const(root, Tensor::FromVector<float>({1, 1, 1, 1, 1, 1}, TensorShape({3, 2})));
  Output add = ops::ScatterAdd(root, v, Ids(root, {3, 0, 3}), ones);
  Output sub = ops::ScatterSub(root, v, ops::Const(root, Tensor::FromVector<int64_t>({1})),
                               ops::Const(root, Tensor::FromVector<float>({10, 20}, TensorShape({1, 2}))));
  Output upd = ops::ScatterUpdate(root, v, Ids(root, {2, 2}),
                                  ops::Const(root, Tensor::FromVector<float>({8, 8, 9, 9}, TensorShape({2, 2}))));
  Output bad = ops::ScatterAdd(root, v, Ids(root, {1, 4}),
                               ops::Const(root, Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2}))));
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {init}, {}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {add.op()}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {sub.op()}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {upd.op()}).ok());
  const Tensor want = Tensor::FromVector<float>({1, 2, -8, -17, 9, 9, 8, 9}, TensorShape({4, 2}));
  auto after = sess.Run({}, {v}, {});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TENSOR_EQ(want, (*after)[0]);
  auto failed = sess.Run({}, {}, {bad.op()});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("ScatterAdd"), std::string::npos) << failed.status();
  EXPECT_NE(failed.status().message().find("indices[1] = 4 is not in [0, 4)"), std::string::npos) << failed.status();
  auto still = sess.Run({}, {v}, {});
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_TENSOR_EQ(want, (*still)[0]);  // nothing half-written
}

// ops::EmbeddingLookup over 3 parts of a 7 x 2 table ("mod" and "div"
// layouts) equals rows of the whole table (NumPy's table[ids]); its gradient
// is numeric-checked with respect to every part.
TEST(EmbeddingLookup, PartsMatchTheWholeTableAndGradientsCheck) {
  std::vector<double> whole(14);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = 0.5 * static_cast<double>(i);
  const std::vector<int64_t> ids = {6, 0, 3, 4, 2, 6};
  auto rows_of = [&](const std::vector<int64_t>& rows) {
    std::vector<double> v;
    for (int64_t r : rows) v.insert(v.end(), whole.begin() + r * 2, whole.begin() + r * 2 + 2);
    return Tensor::FromVector<double>(v, TensorShape({static_cast<int64_t>(rows.size()), 2}));
  };
  const std::vector<std::vector<int64_t>> mod_parts = {{0, 3, 6}, {1, 4}, {2, 5}};
  const std::vector<std::vector<int64_t>> div_parts = {{0, 1, 2}, {3, 4}, {5, 6}};
  for (const auto& [strategy, layout] : {std::pair{"mod", mod_parts}, std::pair{"div", div_parts}}) {
    SCOPED_TRACE(strategy);
    Scope root = Scope::NewRootScope();
    std::vector<Output> parts;
    for (const auto& rows : layout) parts.push_back(ops::Const(root, rows_of(rows)));
    Output ids_t = ops::Const(root, Tensor::FromVector<int64_t>(ids, TensorShape({2, 3})));
    Output out = ops::EmbeddingLookup(root, parts, ids_t, strategy);
    ASSERT_TRUE(root.ok()) << root.status();
    Session sess;
    auto r = sess.Run({out});
    ASSERT_TRUE(r.ok()) << r.status();
    Tensor want = rows_of(ids);
    ASSERT_TRUE(want.Reshaped(TensorShape({2, 3, 2})).ok());
    EXPECT_TENSOR_EQ(*want.Reshaped(TensorShape({2, 3, 2})), (*r)[0]);
    const std::string strat = strategy;
    CheckGradient(
        {rows_of(layout[0]), rows_of(layout[1]), rows_of(layout[2])},
        [&](const Scope& s, const std::vector<Output>& x) {
          return ops::Square(s, ops::EmbeddingLookup(s, x, Ids(s, {6, 0, 3, 4, 2, 6}), strat));
        },
        "EmbeddingLookup " + strat, kTol, /*require_gradient=*/true);
  }
  Scope bad = Scope::NewRootScope();
  ops::EmbeddingLookup(bad, {ops::Const(bad, rows_of({0})), ops::Const(bad, rows_of({1}))}, Ids(bad, {0}), "stripes");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mod' or 'div', got 'stripes'"), std::string::npos) << bad.status();
}

// With the parts on two ps tasks and the rest on a worker, each part's ids
// are computed on its own ps from the ids, as the Python embedding_lookup
// does: everything upstream of a part's Gather but the ids themselves is on
// that part's device, so only the ids reach a ps and rows
// come back.
TEST(EmbeddingLookup, EachPartsIdsAndGatherRunOnThePartsDevice) {
  for (const std::string strategy : {"mod", "div"}) {
    SCOPED_TRACE(strategy);
    Scope root = Scope::NewRootScope().WithDevice("/job:worker/task:0");
    const std::vector<std::string> ps = {"/job:ps/task:0", "/job:ps/task:1"};
    std::vector<Output> parts;
    for (const std::string& d : ps) {
      parts.push_back(ops::Variable(root.WithDevice(d).WithOpName("part_" + d.substr(d.size() - 1)), {5, 3}, DT_FLOAT));
    }
    Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
    Output out = ops::EmbeddingLookup(root, parts, ids, strategy);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(out.node()->def().device(), "/job:worker/task:0");
    absl::MutexLock lock(&root.graph_state()->mu);
    int gathers = 0;
    for (const auto& n : root.graph_state()->graph.nodes()) {
      if (n->op() != "Gather") continue;
      ++gathers;
      const std::string& device = n->def().device();
      ASSERT_TRUE(device == ps[0] || device == ps[1]) << device;
      std::vector<const Node*> stack = {n->input(1).node};
      while (!stack.empty()) {
        const Node* up = stack.back();
        stack.pop_back();
        if (up == ids.node()) continue;
        EXPECT_EQ(up->def().device(), device) << up->name() << " (" << up->op() << ") feeds " << n->name();
        for (const NodeOut& in : up->inputs()) stack.push_back(in.node);
      }
    }
    EXPECT_EQ(gathers, 2);
  }
}

}  // namespace
}  // namespace distflow
