// Numeric gradient checks (float64) of the NN ops' gradients.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "client/gradient_checker.h"
#include "client/gradient_test_util.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using namespace grad_test;  // NOLINT: the shared gradient-test helpers

// Random values at least `gap` away from each of `avoid` (kinks).
Tensor RandomAvoiding(const TensorShape& shape, double lo, double hi, std::vector<double> avoid, double gap, int seed) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DT_DOUBLE, shape);
  for (double& v : t.flat<double>()) {
    bool ok;
    do {
      v = u(gen);
      ok = true;
      for (double a : avoid) ok &= std::fabs(v - a) > gap;
    } while (!ok);
  }
  return t;
}

// Distinct values (a shuffled grid) so max-pooling has no ties.
Tensor Distinct(const TensorShape& shape, int seed) {
  Tensor t(DT_DOUBLE, shape);
  auto f = t.flat<double>();
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.1 * static_cast<double>(i) - 1.0;
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::shuffle(f.begin(), f.end(), gen);
  return t;
}

void Check(const std::vector<Tensor>& values, const Builder& f, const std::string& what, double tol = kTol) {
  CheckGradient(values, f, what, tol, /*require_gradient=*/false);
}

TEST(NnGradientCheck, Activations) {
  Check(
      {RandomAvoiding(S({2, 5}), -2, 2, {0}, 0.05, 1)},
      [](const Scope& s, const std::vector<Output>& x) { return Op(s, "Relu", {x[0]}); }, "Relu");
  Check(
      {RandomAvoiding(S({2, 5}), -2, 8, {0, 6}, 0.05, 2)},
      [](const Scope& s, const std::vector<Output>& x) { return Op(s, "Relu6", {x[0]}); }, "Relu6");
  Check(
      {RandomAvoiding(S({2, 5}), -2, 2, {0}, 0.05, 3)},
      [](const Scope& s, const std::vector<Output>& x) { return Op(s, "Elu", {x[0]}); }, "Elu");
  for (const char* op : {"Sigmoid", "Tanh", "Softplus", "Softmax", "LogSoftmax"}) {
    Check(
        {Random(S({3, 4}), -2, 2, 4)}, [&](const Scope& s, const std::vector<Output>& x) { return Op(s, op, {x[0]}); },
        op);
  }
  // Softmax through a weighted sum, so the Jacobian is not trivially zero.
  Tensor w = Random(S({3, 4}), -1, 1, 5);
  Check(
      {Random(S({3, 4}), -2, 2, 6)},
      [&](const Scope& s, const std::vector<Output>& x) {
        return ops::Sum(s, ops::Mul(s, Op(s, "Softmax", {x[0]}), ops::Const(s, w)), {0, 1});
      },
      "Softmax weighted");
}

TEST(NnGradientCheck, BiasAddAndL2Loss) {
  Check(
      {Random(S({2, 3, 4}), -1, 1, 10), Random(S({4}), -1, 1, 11)},
      [](const Scope& s, const std::vector<Output>& x) {
        return Op(s, "BiasAdd", {x[0], x[1]});
      },
      "BiasAdd");
  Check(
      {Random(S({2, 3}), -1, 1, 12)},
      [](const Scope& s, const std::vector<Output>& x) { return Op(s, "L2Loss", {x[0]}); }, "L2Loss");
}

TEST(NnGradientCheck, Conv2D) {
  struct Case {
    std::vector<int64_t> strides;
    const char* padding;
  };
  for (const Case& c : {Case{{1, 1, 1, 1}, "SAME"}, Case{{1, 2, 2, 1}, "VALID"}, Case{{1, 2, 2, 1}, "SAME"}}) {
    Check(
        {Random(S({2, 5, 5, 2}), -1, 1, 20), Random(S({3, 3, 2, 3}), -1, 1, 21)},
        [&](const Scope& s, const std::vector<Output>& x) {
          return Op(s, "Conv2D", {x[0], x[1]}, [&](proto::NodeDef* n) {
            SetAttrIntList(n, "strides", c.strides);
            SetAttrString(n, "padding", c.padding);
          });
        },
        std::string("Conv2D ") + c.padding + " stride " + std::to_string(c.strides[1]));
  }
}

TEST(NnGradientCheck, Pooling) {
  for (const char* op : {"MaxPool", "AvgPool"}) {
    for (const char* padding : {"VALID", "SAME"}) {
      Check(
          {Distinct(S({1, 5, 5, 2}), 30)},
          [&](const Scope& s, const std::vector<Output>& x) {
            return Op(s, op, {x[0]}, [&](proto::NodeDef* n) {
              SetAttrIntList(n, "ksize", {1, 2, 2, 1});
              SetAttrIntList(n, "strides", {1, 2, 2, 1});
              SetAttrString(n, "padding", padding);
            });
          },
          std::string(op) + " " + padding);
    }
  }
}

TEST(NnGradientCheck, CrossEntropy) {
  Tensor labels = Tensor::FromVector<double>({1, 0, 0, 0, 0, 0.5, 0.5, 0, 0, 0, 0, 1}, S({3, 4}));
  Check(
      {Random(S({3, 4}), -2, 2, 40)},
      [&](const Scope& s, const std::vector<Output>& x) {
        return Op(s, "SoftmaxCrossEntropyWithLogits", {x[0], ops::Const(s, labels)});
      },
      "SoftmaxCrossEntropyWithLogits");
  Tensor sparse = Tensor::FromVector<int64_t>({2, 0, 3});
  Check(
      {Random(S({3, 4}), -2, 2, 41)},
      [&](const Scope& s, const std::vector<Output>& x) {
        return Op(s, "SparseSoftmaxCrossEntropyWithLogits", {x[0], ops::Const(s, sparse)});
      },
      "SparseSoftmaxCrossEntropyWithLogits");
  // Dense labels get a gradient (TF1's _v2; tf1_gradients_test checks its
  // value) unless stopped, as tf.nn's v1 does; sparse labels get none.
  Scope root = Scope::NewRootScope();
  auto logits = ops::Placeholder(root, DT_DOUBLE, PartialShape({3, 4}));
  auto lab = ops::Placeholder(root, DT_DOUBLE, PartialShape({3, 4}));
  auto loss = Op(root, "SoftmaxCrossEntropyWithLogits", {logits, lab});
  auto stopped = Op(root, "SoftmaxCrossEntropyWithLogits", {logits, ops::StopGradient(root, lab)});
  auto g = Gradients(root, {loss}, {logits, lab});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)[0].ok());
  EXPECT_TRUE((*g)[1].ok());
  auto gs = Gradients(root, {stopped}, {logits, lab});
  ASSERT_TRUE(gs.ok()) << gs.status();
  EXPECT_TRUE((*gs)[0].ok());
  EXPECT_FALSE((*gs)[1].ok());
}

TEST(NnGradientCheck, DropoutUsesTheMask) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({4, 5}));
  Operation d = ops::Raw(root, "Dropout", {x, ops::Const(root, 0.5)});
  Output y(d, 0, root), mask(d, 1, root);
  Tensor w = Random(S({4, 5}), -1, 1, 50);
  auto loss = ops::Sum(root, ops::Mul(root, y, ops::Const(root, w)), {0, 1});
  auto g = Gradients(root, {loss}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  Session sess;
  auto out = sess.Run({{x, Random(S({4, 5}), -1, 1, 51)}}, {mask, (*g)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  auto m = (*out)[0].flat<double>();
  auto gx = (*out)[1].flat<double>();
  auto wv = w.flat<double>();
  for (size_t i = 0; i < m.size(); ++i) EXPECT_DOUBLE_EQ(gx[i], wv[i] * m[i]);
}

TEST(NnGradientCheck, SmallNetwork) {
  // conv -> bias -> relu -> maxpool -> reshape -> matmul -> softmax xent.
  Tensor labels = Tensor::FromVector<int64_t>({1, 0});
  Check(
      {Distinct(S({2, 4, 4, 1}), 60), Random(S({2, 2, 1, 2}), -1, 1, 61), Random(S({2}), 0.1, 0.5, 62),
       Random(S({8, 3}), -1, 1, 63)},
      [&](const Scope& s, const std::vector<Output>& x) {
        Output c = Op(s, "Conv2D", {x[0], x[1]}, [](proto::NodeDef* n) {
          SetAttrIntList(n, "strides", {1, 1, 1, 1});
          SetAttrString(n, "padding", "SAME");
        });
        Output h = Op(s, "Tanh", {Op(s, "BiasAdd", {c, x[2]})});
        Output p = Op(s, "AvgPool", {h}, [](proto::NodeDef* n) {
          SetAttrIntList(n, "ksize", {1, 2, 2, 1});
          SetAttrIntList(n, "strides", {1, 2, 2, 1});
          SetAttrString(n, "padding", "VALID");
        });
        Output logits = ops::MatMul(s, ops::Reshape(s, p, {2, 8}), x[3]);
        Output xent = Op(s, "SparseSoftmaxCrossEntropyWithLogits", {logits, ops::Const(s, labels)});
        return ops::Mean(s, xent, {0});
      },
      "small network");
}

}  // namespace
}  // namespace distflow
