#include <cmath>
#include <vector>

#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/scope.h"
#include "distflow/scope_status.h"
#include "distflow/session.h"
#include "gtest/gtest.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

TEST(Client, HelloDistributed) {
  Scope root = Scope::NewRootScope();
  auto hello = ops::Const(root, "Hello, distributed TensorFlow!");
  Session sess;
  auto out = sess.Run({hello});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<std::string>(), "Hello, distributed TensorFlow!");
}

TEST(Client, NamesAreUniqueAndScoped) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root, 1.f);
  auto b = ops::Const(root, 2.f);
  Scope layer = root.NewSubScope("layer1");
  auto c = ops::Const(layer.WithOpName("weights"), 3.f);
  auto d = ops::Identity(layer, c);
  EXPECT_EQ(a.op().name(), "Const");
  EXPECT_EQ(b.op().name(), "Const_1");
  EXPECT_EQ(c.op().name(), "layer1/weights");
  EXPECT_EQ(d.op().name(), "layer1/Identity");
  EXPECT_EQ(d.name(), "layer1/Identity:0");
}

TEST(Client, DeviceScopesAndFunctionsSetRequestedDevices) {
  Scope root = Scope::NewRootScope();
  auto ps0 = root.WithDevice("/job:ps/task:0");
  auto w = ops::Variable(ps0.WithOpName("weights_1"), {784, 100}, DT_FLOAT);
  EXPECT_EQ(w.node()->def().device(), "/job:ps/task:0");
  std::vector<NodeInfo> seen;
  auto f = root.WithDeviceFunction([&seen](const NodeInfo& n) {
    seen.push_back(n);
    return n.op == "Variable" ? std::string("/job:ps/task:1") : std::string("/job:worker/task:0");
  });
  auto v = ops::Variable(f.WithOpName("v"), {2, 3}, DT_DOUBLE);
  auto c = ops::Const(f, 1.f);
  EXPECT_EQ(v.node()->def().device(), "/job:ps/task:1");
  EXPECT_EQ(c.node()->def().device(), "/job:worker/task:0");
  // The function is shown the node's name, op, and a variable's dtype and shape.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].name, "v");
  EXPECT_EQ(seen[0].op, "Variable");
  EXPECT_EQ(seen[0].dtype, DT_DOUBLE);
  EXPECT_EQ(seen[0].shape.DebugString(), PartialShape({2, 3}).DebugString());
  EXPECT_EQ(seen[1].op, "Const");
  EXPECT_EQ(seen[1].dtype, DT_FLOAT);         // a Const has a dtype attribute too
  EXPECT_TRUE(seen[1].shape.unknown_rank());  // but no shape attribute
  // Inside a device scope, the function is shown the device chosen so far.
  auto g = root.WithDevice("/job:ps/task:0").WithDeviceFunction([](const NodeInfo& n) {
    return n.device + "/device:CPU:0";
  });
  EXPECT_EQ(ops::Const(g, 2.f).node()->def().device(), "/job:ps/task:0/device:CPU:0");
}

TEST(Client, ControlDependenciesAreAdded) {
  Scope root = Scope::NewRootScope();
  auto v = ops::Variable(root, {}, DT_INT32);
  auto set = ops::Assign(root, v, ops::Const(root, 5));
  auto after = ops::Identity(root.WithControlDependencies({set.op()}), v);
  ASSERT_EQ(after.node()->control_inputs().size(), 1u);
  Session sess;
  auto out = sess.Run({after});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 5);
}

// The rules shape inference and the kernels share (graph/shape_rules.h) give
// one answer: what is refused while building is refused, in the same words,
// when the same values only arrive as feeds at run time.
TEST(Client, BuildTimeAndRunTimeRefuseTheSameRangeAndReshape) {
  Scope root = Scope::NewRootScope();
  ops::Range(root, ops::Const(root, 0.f), ops::Const(root, std::nanf("")), ops::Const(root, 1.f));
  ASSERT_FALSE(root.ok());
  const std::string built(root.status().message());
  EXPECT_NE(built.find("Range requires finite start, limit and delta"), std::string::npos) << built;

  Scope late = Scope::NewRootScope();
  auto limit = ops::Placeholder(late, DT_FLOAT);
  auto range = ops::Range(late, ops::Const(late, 0.f), limit, ops::Const(late, 1.f));
  ASSERT_TRUE(late.ok()) << late.status();
  Session sess;
  auto ran = sess.Run({{limit, Tensor::Scalar<float>(std::nanf(""))}}, {range}, {});
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().message().find(built.substr(built.find("Range requires"))), std::string::npos)
      << ran.status() << "\nbuilt: " << built;

  Scope r2 = Scope::NewRootScope();
  ops::Reshape(r2, ops::Const(r2, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, TensorShape({6})), std::vector<int64_t>{-1, 4});
  ASSERT_FALSE(r2.ok());
  const std::string reshape_built(r2.status().message());
  Scope r3 = Scope::NewRootScope();
  auto shape = ops::Placeholder(r3, DT_INT32);
  auto reshaped = ops::Reshape(r3, ops::Const(r3, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, TensorShape({6})), shape);
  Session sess3;
  auto r3_out = sess3.Run({{shape, Tensor::FromVector<int32_t>({-1, 4})}}, {reshaped}, {});
  ASSERT_FALSE(r3_out.ok());
  const std::string words =
      "Input to reshape is a tensor with 6 values, but the requested shape [-1,4] requires a "
      "multiple of 4";
  EXPECT_NE(reshape_built.find(words), std::string::npos) << reshape_built;
  EXPECT_NE(r3_out.status().message().find(words), std::string::npos) << r3_out.status();
}

TEST(Client, BuildErrorIsKeptAndReportedByRun) {
  Scope root = Scope::NewRootScope();
  auto v = ops::Variable(root.WithOpName("w"), {2, 2}, DT_FLOAT);
  auto bad = ops::Assign(root, v, ops::Const(root, {1, 2, 3}, TensorShape({3})));
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(root.ok());
  auto later = ops::Identity(root, v);
  EXPECT_FALSE(later.ok()) << "after an error, further ops are no-ops";
  Session sess;
  auto out = sess.Run({v});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("cannot assign a value of shape [3] to a variable of shape [2,2]"),
            std::string::npos)
      << out.status();
}

TEST(Client, TakingTheErrorOutLetsTheGraphGoOn) {
  // What a client that reports each error as it happens does (Python raises
  // it): the failed op is not in the graph, and later ops build and run.
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, TensorShape({2, 3}));
  auto b = ops::Const(root, {1.0f, 2.0f}, TensorShape({1, 2}));
  const int nodes = root.num_nodes();
  EXPECT_FALSE(ops::MatMul(root, a, b).ok());
  absl::Status taken = TakeScopeStatus(root);
  EXPECT_TRUE(absl::IsInvalidArgument(taken)) << taken;
  EXPECT_NE(taken.message().find("MatMul"), std::string::npos) << taken;
  EXPECT_TRUE(root.ok());
  EXPECT_TRUE(TakeScopeStatus(root).ok()) << "taken once";
  EXPECT_EQ(root.num_nodes(), nodes) << "the failed op is not in the graph";
  auto c = ops::Const(root, {1.0f, 0.0f, 0.0f}, TensorShape({3, 1}));
  auto y = ops::MatMul(root, a, c);
  ASSERT_TRUE(y.ok()) << root.status();
  Session sess;
  auto out = sess.Run({y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].flat<float>()[0], 1.0f);
  EXPECT_EQ((*out)[0].flat<float>()[1], 4.0f);
}

TEST(Client, VariablesWithInitializers) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, {1, 2, 3, 4}, TensorShape({2, 2})));
  auto b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, 0.5f));
  auto init = ops::GlobalVariablesInitializer(root);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  auto out = sess.Run({w, b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})), (*out)[0]);
  EXPECT_EQ((*out)[1].scalar<float>(), 0.5f);
}

// TF's LOCAL_VARIABLES: a local variable is not trainable, is left out of
// GlobalVariablesInitializer and is what LocalVariablesInitializer runs.
TEST(Client, LocalVariablesHaveTheirOwnInitializer) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 1.0f));
  ops::VariableOptions local;
  local.local = true;
  auto count = ops::MakeVariable(root.WithOpName("count"), ops::Const(root, 0.0f), local);
  ASSERT_EQ(root.TrainableVariables().size(), 1u);
  EXPECT_EQ(root.TrainableVariables()[0].node(), w.node());
  std::vector<Output> locals = ops::LocalVariables(root);
  ASSERT_EQ(locals.size(), 1u);
  EXPECT_EQ(locals[0].node(), count.node());
  auto global_init = ops::GlobalVariablesInitializer(root);
  auto local_init = ops::LocalVariablesInitializer(root);
  auto w_ready = ops::IsVariableInitialized(root, w);
  auto count_ready = ops::IsVariableInitialized(root, count);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {global_init}).ok());
  auto after_global = sess.Run({w_ready, count_ready});
  ASSERT_TRUE(after_global.ok()) << after_global.status();
  EXPECT_TRUE((*after_global)[0].scalar<bool>());
  EXPECT_FALSE((*after_global)[1].scalar<bool>());
  ASSERT_TRUE(sess.Run({}, {}, {local_init}).ok());
  auto after_local = sess.Run({count_ready, count});
  ASSERT_TRUE(after_local.ok()) << after_local.status();
  EXPECT_TRUE((*after_local)[0].scalar<bool>());
  EXPECT_EQ((*after_local)[1].scalar<float>(), 0.0f);
}

TEST(Client, GraphGrowsBetweenRuns) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root, 1.f);
  Session sess;
  ASSERT_TRUE(sess.Run({a}).ok());
  auto b = ops::Identity(root, a);
  auto out = sess.Run({b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 1.f);
}

TEST(Client, FeedsPlaceholders) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1}));
  auto y = ops::Identity(root, x);
  Session sess;
  auto out = sess.Run({{x, Tensor::FromVector<float>({1, 2})}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({1, 2}), (*out)[0]);
}

TEST(Client, UnsupportedTargetsAreClearErrors) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Const(root, 1.f);
  Session bad("tcp://nowhere");
  auto out = bad.Run({a});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Unknown session target 'tcp://nowhere'"), std::string::npos);
}

}  // namespace
}  // namespace distflow
