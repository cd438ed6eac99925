// Collective ops as a graph sees them, without servers: shape inference
// and the attributes refused when the graph is built, a collective on a
// local session, and fused gradients sliced back into their shapes.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// A collective on a local session (no servers): a group of one is the
// identity; a larger group fails naming what is missing.
TEST(CollectiveLocalSession, GroupOfOneRunsLargerGroupsNeedAServer) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Tensor::FromVector<float>({1, 2, 3}));
  Output one(
      ops::Raw(root, "CollectiveReduce", {x},
               {{"group_size", 1}, {"group_key", 1}, {"instance_key", 1}, {"merge_op", "Add"}, {"final_op", "Div"}}),
      0, root);
  Output two(
      ops::Raw(root, "CollectiveReduce", {x},
               {{"group_size", 2}, {"group_key", 1}, {"instance_key", 2}, {"merge_op", "Add"}, {"final_op", "Id"}}),
      0, root);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  absl::StatusOr<std::vector<Tensor>> a = sess.Run({one});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].flat<float>()[2], 3.0f);
  absl::StatusOr<std::vector<Tensor>> b = sess.Run({two});
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::StrContains(b.status().message(), "no collective executor")) << b.status();
}

// A fused bucket is sliced back into each gradient's own shape (a scalar,
// a matrix, a vector whose gradient is sparse): with a group of one the
// reduction is the identity, so the fused gradients equal the raw ones;
// a gradient of another dtype and a negative threshold are refused.
TEST(CollectiveLocalSession, FusedGradientsKeepTheirShapes) {
  Scope root = Scope::NewRootScope();
  Output a = ops::MakeVariable(root.WithOpName("a"), ops::Const(root, 1.5f));
  Output b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, {1.f, 2.f, 3.f, 4.f}, TensorShape({2, 2})));
  Output c = ops::MakeVariable(root.WithOpName("c"), ops::Const(root, {.5f, -1.f, 2.f}, TensorShape({3})));
  Output rows = ops::EmbeddingLookup(root, {c}, ops::Const(root, {0, 2}));
  Output loss = ops::AddN(root, {ops::Mul(root, a, a), ops::Sum(root, ops::Square(root, b), {0, 1}),
                                 ops::Sum(root, ops::Mul(root, rows, rows), {0})});
  GradientDescentOptimizer sgd(0.1);
  absl::StatusOr<Optimizer::GradsAndVars> grads = sgd.ComputeGradients(root, loss, {a, b, c});
  ASSERT_TRUE(grads.ok()) << grads.status();
  CollectiveAllReduceOptions o;
  absl::StatusOr<Optimizer::GradsAndVars> fused = AllReduceGradients(root, *grads, o);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<Output> fetch;
  for (const auto& [g, v] : *grads) fetch.push_back(g);
  for (const auto& [g, v] : *fused) fetch.push_back(g);
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  absl::StatusOr<std::vector<Tensor>> out = sess.Run(fetch);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i < 3; ++i) {
    const Tensor &raw = (*out)[i], &got = (*out)[i + 3];
    EXPECT_EQ(got.shape().DebugString(), raw.shape().DebugString()) << "gradient " << i;
    ASSERT_EQ(got.TotalBytes(), raw.TotalBytes()) << "gradient " << i;
    EXPECT_EQ(std::string(static_cast<const char*>(got.raw_data()), got.TotalBytes()),
              std::string(static_cast<const char*>(raw.raw_data()), raw.TotalBytes()))
        << "gradient " << i;
  }
  EXPECT_EQ((*out)[3].scalar<float>(), 3.0f);  // d(a^2)/da at 1.5

  Output n = ops::MakeVariable(root.WithOpName("n"), ops::Const(root, int64_t{3}));
  absl::StatusOr<Optimizer::GradsAndVars> ints = AllReduceGradients(root, {{ops::Const(root, int64_t{1}), n}}, o);
  ASSERT_FALSE(ints.ok());
  EXPECT_TRUE(absl::StrContains(ints.status().message(), "the gradient of n")) << ints.status();
  o.fusion_threshold_bytes = -1;
  absl::StatusOr<std::unique_ptr<CollectiveAllReduceOptimizer>> bad =
      CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "fusion_threshold_bytes must be 0 (no fusion) or more"))
      << bad.status();
}

// With a cycle time every gradient gets its own CollectiveReduce (fused at
// run time, collective/fusion_buffer.h), from the option or
// DISTFLOW_FUSION_CYCLE_MS; without one the graph-time bucket slices them
// back (Reshape); bad cycle times are refused naming the option or variable.
TEST(CollectiveLocalSession, ACycleTimeGivesEveryGradientItsOwnReduction) {
  Scope root = Scope::NewRootScope();
  Output a = ops::MakeVariable(root.WithOpName("a"), ops::Const(root, 1.5f));
  Output b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, {1.f, 2.f, 3.f, 4.f}, TensorShape({2, 2})));
  const Optimizer::GradsAndVars grads = {{ops::Const(root, 1.f), a},
                                         {ops::Const(root, {1.f, 2.f, 3.f, 4.f}, TensorShape({2, 2})), b}};
  CollectiveAllReduceOptions o;
  o.num_replicas = 2;
  int calls = 0;
  auto op_types = [&](const CollectiveAllReduceOptions& options) {
    std::vector<std::string> types;
    const Scope s = root.NewSubScope(absl::StrCat("call", calls++));
    absl::StatusOr<Optimizer::GradsAndVars> reduced = AllReduceGradients(s, grads, options);
    EXPECT_TRUE(reduced.ok()) << reduced.status();
    if (reduced.ok())
      for (const auto& [g, v] : *reduced) types.push_back(g.op().op_type());
    return types;
  };
  const std::vector<std::string> own = {"CollectiveReduce", "CollectiveReduce"};
  o.fusion_cycle_ms = 5;
  EXPECT_EQ(op_types(o), own);
  o.fusion_cycle_ms.reset();
  EXPECT_EQ(op_types(o), std::vector<std::string>({"Reshape", "Reshape"}));
  ASSERT_EQ(setenv("DISTFLOW_FUSION_CYCLE_MS", "2.5", 1), 0);
  EXPECT_EQ(op_types(o), own);
  o.fusion_cycle_ms = 0;  // the option wins over the variable
  EXPECT_EQ(op_types(o), std::vector<std::string>({"Reshape", "Reshape"}));
  o.fusion_cycle_ms.reset();
  ASSERT_EQ(setenv("DISTFLOW_FUSION_CYCLE_MS", "soon", 1), 0);
  absl::StatusOr<Optimizer::GradsAndVars> bad_env = AllReduceGradients(root, grads, o);
  ASSERT_FALSE(bad_env.ok());
  EXPECT_TRUE(absl::StrContains(bad_env.status().message(), "DISTFLOW_FUSION_CYCLE_MS is 'soon'")) << bad_env.status();
  ASSERT_EQ(unsetenv("DISTFLOW_FUSION_CYCLE_MS"), 0);
  o.fusion_cycle_ms = -1;
  absl::StatusOr<std::unique_ptr<CollectiveAllReduceOptimizer>> bad =
      CollectiveAllReduceOptimizer::Create(std::make_unique<GradientDescentOptimizer>(0.1), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "fusion_cycle_ms must be 0")) << bad.status();
}

TEST(CollectiveOps, RejectsBadAttributesWhenBuilt) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Tensor::FromVector<float>({1, 2, 3}));
  ops::Raw(root, "CollectiveReduce", {x},
           {{"group_size", 2}, {"group_key", 1}, {"instance_key", 1}, {"merge_op", "Sum"}, {"final_op", "Id"}});
  ASSERT_FALSE(root.ok());
  EXPECT_TRUE(absl::StrContains(root.status().message(), "merge_op 'Sum'")) << root.status();
}

TEST(CollectiveOps, InferShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({2, 5}));
  Output reduced(
      ops::Raw(root, "CollectiveReduce", {x},
               {{"group_size", 3}, {"group_key", 1}, {"instance_key", 1}, {"merge_op", "Max"}, {"final_op", "Id"}}),
      0, root);
  Output gathered(ops::Raw(root, "CollectiveGather", {x}, {{"group_size", 3}, {"group_key", 1}, {"instance_key", 2}}),
                  0, root);
  Output received(
      ops::Raw(
          root, "CollectiveBcastRecv", {},
          {{"group_size", 3}, {"group_key", 1}, {"instance_key", 3}, {"T", DT_INT64}, {"shape", PartialShape({4})}}),
      0, root);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(reduced.shape(), PartialShape({2, 5}));
  // Ranks may gather different numbers of rows: dimension 0 is unknown.
  EXPECT_EQ(gathered.shape(), PartialShape({PartialShape::kUnknownDim, 5}));
  EXPECT_EQ(received.shape(), PartialShape({4}));
  EXPECT_EQ(received.dtype(), DT_INT64);
  ops::Raw(root, "CollectiveBcastSend", {x},
           {{"group_size", 3}, {"group_key", 1}, {"instance_key", 4}, {"shape", PartialShape({3})}});
  ASSERT_FALSE(root.ok());
  EXPECT_TRUE(absl::StrContains(root.status().message(), "does not fit the shape attribute")) << root.status();
  Scope other = Scope::NewRootScope();
  ops::Raw(other, "CollectiveBcastSend", {ops::Const(other, Tensor::FromVector<float>({1}))},
           {{"group_size", 3}, {"group_key", 1}, {"instance_key", 4}, {"shape", PartialShape({1})}, {"root_rank", 3}});
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::StrContains(other.status().message(), "root_rank 3 is not a rank of the group of size 3 (0..2"))
      << other.status();
}

}  // namespace
}  // namespace distflow
