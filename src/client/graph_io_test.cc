#include "distflow/graph_io.h"

#include <string>
#include <vector>

#include "distflow/ops.h"
#include "distflow/session.h"
#include "gtest/gtest.h"
#include "proto/graph.pb.h"

namespace distflow {
namespace {

TEST(GraphIo, AnImportedGraphRunsUnderItsPrefixWithItsControlEdges) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithOpName("a"), 3.0f);
  Output b = ops::Const(root.WithOpName("b"), 4.0f);
  Output v = ops::Variable(root.WithOpName("v"), PartialShape({}), DT_FLOAT);
  Output assign = ops::Assign(root.WithOpName("set_v"), v, a);
  Output sum = ops::Add(root.WithOpName("sum").WithControlDependencies({assign.op()}), a, b);
  const std::string bytes = SerializeGraph(root);

  Scope other = Scope::NewRootScope();
  ops::Const(other.WithOpName("unrelated"), 1.0f);
  absl::StatusOr<std::vector<Operation>> ops = ImportGraph(other, bytes, "copy/");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(ops->size(), 5u);
  Operation copied_sum = other.FindOperation("copy/sum");
  ASSERT_TRUE(copied_sum.ok());
  Session sess;
  absl::StatusOr<std::vector<Tensor>> out = sess.Run({}, {Output(copied_sum, 0, other)}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 7.0f);
  // The control edge came along: computing the sum assigned the variable.
  out = sess.Run({}, {Output(other.FindOperation("copy/v"), 0, other)}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 3.0f);
  // The imported name scope is taken: a new "copy" scope is "copy_1".
  EXPECT_EQ(other.NewSubScope("copy").GetUniqueName("x"), "copy_1/x");
}

TEST(GraphIo, DevicesAreKeptOrCleared) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("c").WithDevice("/job:ps/task:0"), 1.0f);
  const std::string bytes = SerializeGraph(root);
  Scope kept = Scope::NewRootScope();
  ASSERT_TRUE(ImportGraph(kept, bytes).ok());
  EXPECT_EQ(kept.FindOperation("c").device(), "/job:ps/task:0");
  Scope cleared = Scope::NewRootScope();
  ASSERT_TRUE(ImportGraph(cleared, bytes, "", /*clear_devices=*/true).ok());
  EXPECT_EQ(cleared.FindOperation("c").device(), "");
}

TEST(GraphIo, BadGraphsAreErrorsNamingTheNodeAndAddNothing) {
  Scope root = Scope::NewRootScope();
  EXPECT_NE(ImportGraph(root, "\xff\xff\xff not a graph").status().message().find("not a GraphDef"),
            std::string::npos);

  proto::GraphDef missing;
  proto::NodeDef* n = missing.add_node();
  n->set_name("neg");
  n->set_op("Neg");
  n->add_input("nowhere:0");
  absl::Status s = ImportGraph(root, missing.SerializeAsString()).status();
  EXPECT_NE(s.message().find("node 'neg' reads 'nowhere:0'"), std::string::npos) << s;

  proto::GraphDef twice;
  twice.add_node()->set_name("x");
  twice.add_node()->set_name("x");
  s = ImportGraph(root, twice.SerializeAsString()).status();
  EXPECT_NE(s.message().find("two nodes named 'x'"), std::string::npos) << s;

  proto::GraphDef cycle;
  proto::NodeDef* p = cycle.add_node();
  p->set_name("p");
  p->set_op("Identity");
  p->add_input("q");
  proto::NodeDef* q = cycle.add_node();
  q->set_name("q");
  q->set_op("Identity");
  q->add_input("p");
  s = ImportGraph(root, cycle.SerializeAsString()).status();
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_NE(s.message().find("cycle through"), std::string::npos) << s;

  EXPECT_EQ(root.num_nodes(), 0);
  EXPECT_TRUE(root.ok());
}

}  // namespace
}  // namespace distflow
