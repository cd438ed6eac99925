#include "distflow/graph_io.h"

#include <string>
#include <vector>

#include "base/status_macros.h"
#include "distflow/control_flow.h"
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

// sum(i for i in range(n)) and, nested inside, a loop counting to 3 per
// outer iteration: the loops' back edges (NextIteration into Merge) are
// connected after their nodes are in, so the imported copy runs as the
// original does.
TEST(GraphIo, GraphsWithWhileLoopsImportAndRun) {
  Scope root = Scope::NewRootScope();
  Output n = ops::Placeholder(root.WithOpName("n"), DT_INT32, PartialShape({}));
  ops::WhileOptions opts;
  opts.back_prop = false;
  opts.invariants = {n};
  auto loop = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Const(root, 0), ops::Const(root, 0)},
      [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], v[3]); },
      [](const Scope& s, const std::vector<Output>& v) -> absl::StatusOr<std::vector<Output>> {
        ops::WhileOptions inner_opts;
        inner_opts.back_prop = false;
        inner_opts.name = "inner";
        auto inner = ops::WhileLoop(
            s, {ops::Const(s, 0), v[2]},
            [](const Scope& t, const std::vector<Output>& w) -> absl::StatusOr<Output> {
              return ops::Less(t, w[0], ops::Const(t, 3));
            },
            [](const Scope& t, const std::vector<Output>& w) -> absl::StatusOr<std::vector<Output>> {
              return std::vector<Output>{ops::Add(t, w[0], ops::Const(t, 1)), ops::Add(t, w[1], ops::Const(t, 1))};
            },
            inner_opts);
        RETURN_IF_ERROR(inner.status());
        return std::vector<Output>{ops::Add(s, v[0], ops::Const(s, 1)), ops::Add(s, v[1], v[0]), (*inner)[1]};
      },
      opts);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const std::string sum_name = (*loop)[1].name(), count_name = (*loop)[2].name();
  const std::string bytes = SerializeGraph(root);

  Scope other = Scope::NewRootScope();
  absl::StatusOr<std::vector<Operation>> ops = ImportGraph(other, bytes, "copy/");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE(other.ok()) << other.status();
  auto output = [&](const std::string& name) {
    const size_t colon = name.rfind(':');
    return Output(other.FindOperation("copy/" + name.substr(0, colon)), std::stoi(name.substr(colon + 1)), other);
  };
  Output sum = output(sum_name), count = output(count_name);
  ASSERT_TRUE(sum.ok() && count.ok()) << sum_name << " " << count_name;
  Output copied_n(other.FindOperation("copy/n"), 0, other);
  Session sess;
  for (int32_t k : {0, 1, 10}) {
    absl::StatusOr<std::vector<Tensor>> out = sess.Run({{copied_n, Tensor::Scalar<int32_t>(k)}}, {sum, count}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), k * (k - 1) / 2) << "n = " << k;
    EXPECT_EQ((*out)[1].scalar<int32_t>(), 3 * k) << "n = " << k;
  }
}

TEST(GraphIo, ColocationClassesNamingImportedNodesGetThePrefix) {
  // tf.Variable(callable)'s initial value carries "_class": "loc:@v"; in a
  // copy it must name the copy's variable, as TensorFlow's importer does.
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("v"), 1.0f);
  ops::Const(root.WithOpName("v/Initializer/value"), 2.0f);
  proto::GraphDef def;
  ASSERT_TRUE(def.ParseFromString(SerializeGraph(root)));
  for (proto::NodeDef& n : *def.mutable_node()) {
    if (n.name() != "v/Initializer/value") continue;
    auto* classes = (*n.mutable_attr())["_class"].mutable_list();
    classes->add_s("loc:@v");
    classes->add_s("loc:@elsewhere");
  }
  Scope other = Scope::NewRootScope();
  absl::StatusOr<std::vector<Operation>> ops = ImportGraph(other, def.SerializeAsString(), "copy/");
  ASSERT_TRUE(ops.ok()) << ops.status();
  proto::GraphDef out;
  ASSERT_TRUE(out.ParseFromString(SerializeGraph(other)));
  bool found = false;
  for (const proto::NodeDef& n : out.node()) {
    if (n.name() != "copy/v/Initializer/value") continue;
    found = true;
    const auto& list = n.attr().at("_class").list();
    ASSERT_EQ(list.s_size(), 2);
    EXPECT_EQ(list.s(0), "loc:@copy/v");
    EXPECT_EQ(list.s(1), "loc:@elsewhere");  // not a node of the imported graph
  }
  EXPECT_TRUE(found);
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
  EXPECT_NE(ImportGraph(root, "\xff\xff\xff not a graph").status().message().find("not a GraphDef"), std::string::npos);

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
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("cycle through"), std::string::npos) << s;
  EXPECT_NE(s.message().find("not a while loop's back edge"), std::string::npos) << s;

  EXPECT_EQ(root.num_nodes(), 0);
  EXPECT_TRUE(root.ok());
}

}  // namespace
}  // namespace distflow
