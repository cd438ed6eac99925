// Trains y = X w + b by gradient descent with hand-written gradient ops and
// checks that it converges to the known solution.
#include <random>

#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/scope.h"
#include "distflow/session.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(LinearRegression, HandWrittenGradientsConverge) {
  const int n = 256;
  std::mt19937 gen(7);
  std::normal_distribution<float> noise(0.f, 0.01f);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * 2), ys(n);
  for (int i = 0; i < n; ++i) {
    xs[2 * i] = u(gen);
    xs[2 * i + 1] = u(gen);
    ys[i] = 2.f * xs[2 * i] - 3.f * xs[2 * i + 1] + 0.5f + noise(gen);
  }
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 2}));
  auto y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialShape({-1, 1}));
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, {0.f, 0.f}, TensorShape({2, 1})));
  auto b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, {0.f}, TensorShape({1})));
  auto pred = ops::MatMul(root, x, w) + b;
  auto err = pred - y;
  auto loss = ops::Mean(root, ops::Square(root, err), {0, 1});
  auto two_over_n = ops::Const(root, 2.f / n);
  auto grad_w = ops::MatMul(root, x, err, /*transpose_a=*/true) * two_over_n;
  auto grad_b = ops::Sum(root, err, {0}) * two_over_n;
  auto lr = ops::Const(root, 0.5f);
  auto step_w = ops::AssignSub(root, w, grad_w * lr);
  auto step_b = ops::AssignSub(root, b, grad_b * lr);
  auto train = ops::Group(root, {step_w.op(), step_b.op()});
  auto init = ops::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  FeedDict feeds = {{x, Tensor::FromVector<float>(xs, TensorShape({n, 2}))},
                    {y, Tensor::FromVector<float>(ys, TensorShape({n, 1}))}};
  auto first = sess.Run(feeds, {loss});
  ASSERT_TRUE(first.ok()) << first.status();
  for (int step = 0; step < 300; ++step) ASSERT_TRUE(sess.Run(feeds, {}, {train}).ok());
  auto out = sess.Run(feeds, {w, b, loss});
  ASSERT_TRUE(out.ok()) << out.status();
  auto wv = (*out)[0].flat<float>();
  EXPECT_NEAR(wv[0], 2.f, 0.02f);
  EXPECT_NEAR(wv[1], -3.f, 0.02f);
  EXPECT_NEAR((*out)[1].flat<float>()[0], 0.5f, 0.02f);
  EXPECT_LT((*out)[2].scalar<float>(), 0.001f);
  EXPECT_LT((*out)[2].scalar<float>(), (*first)[0].scalar<float>() / 100);
}

}  // namespace
}  // namespace distflow
