#include "distflow/train/layers.h"

#include <cmath>
#include <string>
#include <vector>

#include "client/graph_state.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "gmock/gmock.h"
#include "graph/op_def.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

const proto::NodeDef* FindNode(const proto::GraphDef& gd, const std::string& name) {
  for (const proto::NodeDef& n : gd.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

TEST(Layers, FullyConnectedComputesReluOfAffine) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 2}));
  layers::LayerInitializers init{layers::constant(0.5), layers::constant(-1.0)};
  auto y = layers::fully_connected(root, x, 3, layers::kRelu, "fc", init);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 3}));
  auto vars = root.TrainableVariables();
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].op().name(), "fc/weights");
  EXPECT_EQ(vars[0].shape(), PartialShape({2, 3}));
  EXPECT_EQ(vars[1].op().name(), "fc/biases");
  EXPECT_EQ(vars[1].shape(), PartialShape({3}));

  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  // rows: [1, 2] -> 0.5*3 - 1 = 0.5; [1, -2] -> -0.5 - 1 < 0 -> 0.
  auto out = sess.Run({{x, Tensor::FromVector<float>({1, 2, 1, -2}, TensorShape({2, 2}))}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want = {0.5f, 0.5f, 0.5f, 0.f, 0.f, 0.f};
  auto got = (*out)[0].flat<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(Layers, DenseWithoutActivationAndUniqueNames) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({-1, 4}));
  auto h = layers::dense(root, x, 8);
  auto y = layers::dense(root, h, 2, layers::kNoActivation);
  ASSERT_TRUE(root.ok()) << root.status();
  auto vars = root.TrainableVariables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[2].op().name(), "dense_1/weights");
  EXPECT_EQ(vars[2].dtype(), DT_DOUBLE);
  EXPECT_EQ(y.shape(), PartialShape({-1, 2}));
  EXPECT_NE(y.node()->op(), "Relu");
}

TEST(Layers, GlorotUniformIsWithinLimitAndTruncatedNormalWithinTwoStddev) {
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(42);
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 100}));
  layers::fully_connected(root, x, 50, layers::kRelu, "g");
  layers::fully_connected(root, x, 50, layers::kRelu, "t", {layers::truncated_normal(0.1), layers::zeros()});
  ASSERT_TRUE(root.ok()) << root.status();
  auto vars = root.TrainableVariables();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto out = sess.Run({vars[0], vars[1], vars[2]});
  ASSERT_TRUE(out.ok()) << out.status();
  const float limit = std::sqrt(6.f / 150.f);
  float maxabs = 0;
  for (float v : (*out)[0].flat<float>()) {
    EXPECT_LE(std::abs(v), limit);
    maxabs = std::max(maxabs, std::abs(v));
  }
  EXPECT_GT(maxabs, 0.8f * limit) << "values should spread over the range";
  for (float v : (*out)[1].flat<float>()) EXPECT_EQ(v, 0.f);
  for (float v : (*out)[2].flat<float>()) EXPECT_LE(std::abs(v), 0.2f + 1e-6f);
}

TEST(Layers, DeviceFunctionPlacesVariablesAndTheirInitializers) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction([](const NodeInfo& n) {
    return n.op == "Variable" ? std::string("/job:ps/task:0") : std::string("/job:worker/task:0");
  });
  auto x = ops::Placeholder(s, DT_FLOAT, PartialShape({-1, 3}));
  auto y = layers::fully_connected(s, x, 2, layers::kRelu, "fc1");
  ASSERT_TRUE(root.ok()) << root.status();
  proto::GraphDef gd;
  root.ToGraphDef(&gd);
  for (const char* n : {"fc1/weights", "fc1/biases", "fc1/weights/Assign", "fc1/biases/Assign"}) {
    const proto::NodeDef* node = FindNode(gd, n);
    ASSERT_NE(node, nullptr) << n;
    EXPECT_EQ(node->device(), "/job:ps/task:0") << n;
  }
  EXPECT_EQ(y.node()->def().device(), "/job:worker/task:0");
  Session sess;  // devices are ignored locally
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto out = sess.Run({{x, Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3}))}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST(Layers, FlattenAndErrors) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 4, 4, 3}));
  auto f = layers::flatten(root, x);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(f.shape(), PartialShape({-1, 48}));

  Scope bad = Scope::NewRootScope();
  auto u = ops::Placeholder(bad, DT_FLOAT, PartialShape({-1, -1}));
  layers::fully_connected(bad, u, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("known last dimension"));
}

TEST(Layers, FullyConnectedTrainsWithAnOptimizer) {
  // Hand-made gradient of a linear layer: only checks the layer's variables
  // plug into ApplyGradients.
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({1, 2}));
  layers::fully_connected(root, x, 1, layers::kNoActivation, "fc", {layers::zeros(), layers::zeros()});
  auto vars = root.TrainableVariables();
  ASSERT_EQ(vars.size(), 2u);
  GradientDescentOptimizer opt(1.0);
  auto train = opt.ApplyGradients(root, {{ops::Const(root, {1.f, 2.f}, TensorShape({2, 1})), vars[0]},
                                         {ops::Const(root, {1.f}, TensorShape({1})), vars[1]}});
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  auto out = sess.Run({vars[0], vars[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].flat<float>()[1], -2.f);
  EXPECT_EQ((*out)[1].flat<float>()[0], -1.f);
}

TEST(Layers, SmallNetworkTrainsWithMinimize) {
  Scope root = Scope::NewRootScope();
  root.SetGraphSeed(7);
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 2}));
  auto y = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 1}));
  auto h = layers::dense(root, x, 16);
  auto pred = layers::dense(root, h, 1, layers::kNoActivation, "out");
  auto loss = ops::Mean(root, ops::Square(root, pred - y), {0, 1});
  Output step = CreateGlobalStep(root);
  AdamOptimizer opt(0.01);
  auto train = opt.Minimize(root, loss, &step);
  ASSERT_TRUE(train.ok()) << train.status();
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i) {
    const float a = static_cast<float>(i % 8) / 4.f - 1.f, b = static_cast<float>(i / 8) / 4.f - 1.f;
    xs.push_back(a);
    xs.push_back(b);
    ys.push_back(2.f * a - b + 0.5f);
  }
  FeedDict feeds = {{x, Tensor::FromVector<float>(xs, TensorShape({64, 2}))},
                    {y, Tensor::FromVector<float>(ys, TensorShape({64, 1}))}};
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto first = sess.Run(feeds, {loss});
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(sess.Run(feeds, {}, {*train}).ok());
  auto last = sess.Run(feeds, {loss, step});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_LT((*last)[0].scalar<float>(), (*first)[0].scalar<float>() / 20);
  EXPECT_EQ((*last)[1].scalar<int64_t>(), 300);
}

TEST(Layers, Conv2dAndMaxPoolBuildAndRun) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 8, 8, 1}));
  auto c = layers::conv2d(root, x, 4, {3, 3}, 1, "SAME", layers::kRelu, "conv1");
  auto p = layers::max_pool2d(root, c, {2, 2}, 2, "VALID");
  auto f = layers::flatten(root, p);
  auto y = layers::fully_connected(root, f, 10, layers::kNoActivation, "logits");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(c.shape(), PartialShape({-1, 8, 8, 4}));
  EXPECT_EQ(p.shape(), PartialShape({-1, 4, 4, 4}));
  EXPECT_EQ(f.shape(), PartialShape({-1, 64}));
  auto vars = root.TrainableVariables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].op().name(), "conv1/weights");
  EXPECT_EQ(vars[0].shape(), PartialShape({3, 3, 1, 4}));
  EXPECT_EQ(vars[1].op().name(), "conv1/biases");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  std::vector<float> img(2 * 64, 0.5f);
  auto out = sess.Run({{x, Tensor::FromVector<float>(img, TensorShape({2, 8, 8, 1}))}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 10}));
}

}  // namespace
}  // namespace distflow
