#include "runtime/executor.h"

#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "runtime/graph_def_builder_for_test.h"
#include "runtime/local_session.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;

TEST(Executor, RunsOnlyWhatTheFetchNeeds) {
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(1));
  AddNode(&g, "ida", "Identity", {"a"});
  test::AddPlaceholder(&g, "unfed", DT_FLOAT, PartialShape({}));
  AddNode(&g, "idu", "Identity", {"unfed"});
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {}, {{"ida", 0}}, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ((*ex)->num_nodes(), 2) << "the unfed placeholder branch is pruned";
  auto out = (*ex)->Run({}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(1), (*out)[0]);
}

TEST(Executor, FeedCutsTheGraph) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_INT32, PartialShape({-1}));
  AddNode(&g, "y", "Identity", {"x"});
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {{"x", 0}}, {{"y", 0}, {"x", 0}}, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  Tensor v = Tensor::FromVector<int32_t>({4, 5});
  auto out = (*ex)->Run({}, {v});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(v, (*out)[0]);
  EXPECT_TENSOR_EQ(v, (*out)[1]);
}

TEST(Executor, MissingFetchSuggestsNames) {
  proto::GraphDef g;
  AddConst(&g, "weights_1", Tensor::Scalar<float>(1));
  auto graph = Graph::FromGraphDef(g);
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {}, {{"weight_1", 0}}, {});
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ex.status().message().find("did you mean weights_1"), std::string::npos) << ex.status();
}

TEST(Executor, ControlDependenciesOrderSideEffects) {
  // v = 1; then (after the assign, via a control edge) v += 10; fetch v.
  proto::GraphDef g;
  test::AddVariable(&g, "v", PartialShape({}), DT_INT32);
  AddConst(&g, "one", Tensor::Scalar<int32_t>(1));
  AddConst(&g, "ten", Tensor::Scalar<int32_t>(10));
  AddNode(&g, "init", "Assign", {"v", "one"});
  AddNode(&g, "add", "AssignAdd", {"v", "ten", "^init"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto out = s.Run({}, {"add"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 11);
}

}  // namespace
}  // namespace distflow
