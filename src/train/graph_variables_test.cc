// GraphVariables: what CollectiveAllReduceOptimizer::BroadcastVariables
// sends from rank 0 when it is given no list.
#include <string>
#include <vector>

#include "distflow/distflow.h"
#include "distflow/train/collective_all_reduce_optimizer.h"
#include "distflow/train/optimizer.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

std::vector<std::string> Names(const std::vector<Output>& outs) {
  std::vector<std::string> names;
  for (const Output& o : outs) names.push_back(o.op().name());
  return names;
}

TEST(GraphVariables, ListsGlobalVariablesAndSlotsButNotLocalVariables) {
  Scope root = Scope::NewRootScope();
  ops::VariableOptions local;
  local.local = true;
  auto count = ops::MakeVariable(root.WithOpName("count"), ops::Const(root, 0.0f), local);
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, Tensor::FromVector<float>({1.0f, 2.0f})));
  auto seen = ops::MakeVariable(root.WithOpName("seen"), ops::Const(root, int64_t{0}), local);
  Output loss = ops::Sum(root, ops::Mul(root, w, w), {0});
  AdagradOptimizer opt(0.1);
  ASSERT_TRUE(opt.Minimize(root, loss).ok());
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(ops::LocalVariables(root).size(), 2u);

  const std::vector<std::string> names = Names(GraphVariables(root));
  ASSERT_EQ(names.size(), 2u) << ::testing::PrintToString(names);
  EXPECT_EQ(names[0], "w");
  EXPECT_NE(names[1].find("Adagrad"), std::string::npos) << names[1];  // w's accumulator slot
}

}  // namespace
}  // namespace distflow
