#include "graph/graph.h"

#include <limits>

#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

proto::NodeDef Const(const std::string& name, const Tensor& t) {
  proto::NodeDef n;
  n.set_name(name);
  n.set_op("Const");
  SetAttrTensor(&n, "value", t);
  SetAttrType(&n, "dtype", t.dtype());
  return n;
}

proto::NodeDef Node(const std::string& name, const std::string& op, std::vector<std::string> inputs) {
  proto::NodeDef n;
  n.set_name(name);
  n.set_op(op);
  for (auto& i : inputs) n.add_input(i);
  return n;
}

void ExpectInvalid(const proto::GraphDef& g, const std::string& needle) {
  auto r = Graph::FromGraphDef(g);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

TEST(Graph, BuildsInAnyOrderAndInfersTypes) {
  proto::GraphDef g;
  *g.add_node() = Node("id", "Identity", {"c"});
  *g.add_node() = Const("c", Tensor::FromVector<float>({1, 2, 3}));
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const class Node* id = (*graph)->FindNode("id");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->output_type(0), DT_FLOAT);
  EXPECT_EQ(id->output_shape(0), PartialShape({3}));
  EXPECT_EQ(GetAttrType(id->def(), "T").value(), DT_FLOAT) << "T is inferred from the input";
}

TEST(Graph, RejectsUnknownOp) {
  proto::GraphDef g;
  *g.add_node() = Node("x", "Frobnicate", {});
  ExpectInvalid(g, "Node 'x' (Frobnicate): Op 'Frobnicate' is not registered");
}

TEST(Graph, RejectsDanglingInput) {
  proto::GraphDef g;
  *g.add_node() = Node("id", "Identity", {"missing:0"});
  ExpectInvalid(g, "refers to node 'missing'");
}

TEST(Graph, RejectsCycleNamingNodes) {
  proto::GraphDef g;
  *g.add_node() = Node("a", "Identity", {"b"});
  *g.add_node() = Node("b", "Identity", {"a"});
  ExpectInvalid(g, "cycle among nodes: a, b");
}

TEST(Graph, RejectsDuplicateName) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g.add_node() = Const("c", Tensor::Scalar<float>(2));
  ExpectInvalid(g, "Node 'c' (Const): a node with this name appears twice");
}

TEST(Graph, RejectsWrongArity) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g.add_node() = Node("id", "Identity", {"c", "c"});
  ExpectInvalid(g, "Node 'id' (Identity): takes 1 data inputs but was given 2");
  proto::GraphDef g2;
  *g2.add_node() = Node("id", "Identity", {});
  ExpectInvalid(g2, "expects input 'input'");
}

TEST(Graph, RejectsOutputIndexOutOfRange) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g.add_node() = Node("id", "Identity", {"c:3"});
  ExpectInvalid(g, "has only 1 outputs");
}

TEST(Graph, RejectsWrongDtype) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<int32_t>(1));
  proto::NodeDef id = Node("id", "Identity", {"c"});
  SetAttrType(&id, "T", DT_FLOAT);
  *g.add_node() = id;
  ExpectInvalid(g, "has dtype int32 but float32 is expected");
}

TEST(Graph, RejectsBadAttrs) {
  proto::GraphDef g;
  proto::NodeDef p = Node("p", "Placeholder", {});
  SetAttrType(&p, "dtype", DT_FLOAT);
  ExpectInvalid(
      [&] {
        proto::GraphDef x;
        *x.add_node() = p;
        return x;
      }(),
      "missing required attribute 'shape'");
  SetAttrShape(&p, "shape", PartialShape({-1, 3}));
  SetAttrInt(&p, "bogus", 1);
  *g.add_node() = p;
  ExpectInvalid(g, "unknown attribute 'bogus'");
  proto::NodeDef q = Node("q", "Placeholder", {});
  SetAttrInt(&q, "dtype", 3);
  SetAttrShape(&q, "shape", PartialShape({}));
  proto::GraphDef g2;
  *g2.add_node() = q;
  ExpectInvalid(g2, "attribute 'dtype' should be type but is int");
}

TEST(Graph, RejectsNonVariableForRefInput) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g.add_node() = Node("a", "Assign", {"c", "c"});
  ExpectInvalid(g, "must be a variable");
}

TEST(Graph, ShapeMismatchIsReportedAtBuildTimeNamingShapes) {
  proto::GraphDef g;
  proto::NodeDef v = Node("v", "Variable", {});
  SetAttrShape(&v, "shape", PartialShape({2, 2}));
  SetAttrType(&v, "dtype", DT_FLOAT);
  *g.add_node() = v;
  *g.add_node() = Const("c", Tensor::FromVector<float>({1, 2, 3}));
  *g.add_node() = Node("a", "Assign", {"v", "c"});
  ExpectInvalid(g, "cannot assign a value of shape [3] to a variable of shape [2,2]");
}

TEST(Graph, ControlInputsAfterDataInputs) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g.add_node() = Node("n", "NoOp", {"^c"});
  *g.add_node() = Node("id", "Identity", {"c", "^n"});
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->FindNode("id")->control_inputs().size(), 1u);
  proto::GraphDef bad;
  *bad.add_node() = Const("c", Tensor::Scalar<float>(1));
  *bad.add_node() = Node("id", "Identity", {"^c", "c"});
  ExpectInvalid(bad, "data input after a control input");
}

TEST(Graph, RejectsMalformedNames) {
  proto::GraphDef g;
  *g.add_node() = Const("bad name", Tensor::Scalar<float>(1));
  ExpectInvalid(g, "Invalid node name 'bad name'");
  proto::GraphDef g2;
  *g2.add_node() = Const("c", Tensor::Scalar<float>(1));
  *g2.add_node() = Node("id", "Identity", {"c:x"});
  ExpectInvalid(g2, "malformed input name 'c:x'");
}

TEST(Graph, CorruptConstValueIsAnError) {
  proto::GraphDef g;
  proto::NodeDef c = Const("c", Tensor::FromVector<float>({1, 2}));
  (*c.mutable_attr())["value"].mutable_tensor()->mutable_tensor_content()->resize(3);
  *g.add_node() = c;
  ExpectInvalid(g, "Node 'c' (Const)");
}

TEST(Graph, ExtendAddsOnlyNewNodesAndRejectsConflicts) {
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  *g.add_node() = Node("id", "Identity", {"c"});
  ASSERT_TRUE((*graph)->Extend(g).ok());
  EXPECT_EQ((*graph)->num_nodes(), 2);
  proto::GraphDef conflict;
  *conflict.add_node() = Const("c", Tensor::Scalar<float>(2));
  absl::Status s = (*graph)->Extend(conflict);
  EXPECT_NE(s.message().find("a different node with this name"), std::string::npos) << s;
}

TEST(Graph, AFailedExtendLeavesTheGraphUnchanged) {
  proto::GraphDef bad;
  *bad.add_node() = Const("ok", Tensor::Scalar<float>(1));
  *bad.add_node() = Node("broken", "MatMul", {"ok", "ok"});  // scalars: fails after 'ok' is added
  Graph empty;
  EXPECT_FALSE(empty.Extend(bad).ok());
  EXPECT_EQ(empty.num_nodes(), 0);
  proto::GraphDef g;
  *g.add_node() = Const("c", Tensor::Scalar<float>(1));
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  EXPECT_FALSE((*graph)->Extend(bad).ok());
  EXPECT_EQ((*graph)->num_nodes(), 1) << "'ok' must not stay behind";
  EXPECT_EQ((*graph)->FindNode("ok"), nullptr);
}

// Found by the graph_import fuzzer: a node whose attribute is NaN compared
// unequal to itself, so re-sending the same graph was a "conflict".
TEST(Graph, ExtendWithTheSameNodeHoldingANanAttrIsNotAConflict) {
  proto::GraphDef g;
  proto::NodeDef n = Node("n", "NoOp", {});
  (*n.mutable_attr())["_note"].set_f(std::numeric_limits<double>::quiet_NaN());
  *g.add_node() = n;
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::Status s = (*graph)->Extend(g);
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace distflow

namespace distflow {
namespace {

// "vars: Ref(dtypes)" with dtypes a list(type): one input per listed dtype,
// the list inferred from the inputs when it is not given.
TEST(Graph, TypeListInputsAreInferredAndChecked) {
  Graph g;
  proto::NodeDef path = Const("path", Tensor::Scalar<std::string>("/tmp/x"));
  ASSERT_TRUE(g.AddNode(path).ok());
  proto::NodeDef f = Node("f", "Variable", {});
  SetAttrShape(&f, "shape", PartialShape({2}));
  SetAttrType(&f, "dtype", DT_FLOAT);
  ASSERT_TRUE(g.AddNode(f).ok());
  proto::NodeDef i = Node("i", "Variable", {});
  SetAttrShape(&i, "shape", PartialShape({}));
  SetAttrType(&i, "dtype", DT_INT64);
  ASSERT_TRUE(g.AddNode(i).ok());

  proto::NodeDef save = Node("save", "SaveShard", {"path", "f", "i"});
  SetAttrStringList(&save, "names", {"f", "i"});
  auto node = g.AddNode(save);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)->num_inputs(), 3);
  EXPECT_EQ((*node)->input_type(2), DT_INT64);
  EXPECT_EQ(GetAttrTypeList((*node)->def(), "dtypes").value(), (std::vector<DataType>{DT_FLOAT, DT_INT64}));

  // A given list must match the inputs' dtypes.
  proto::NodeDef wrong = Node("wrong", "SaveShard", {"path", "f", "i"});
  SetAttrStringList(&wrong, "names", {"f", "i"});
  SetAttrTypeList(&wrong, "dtypes", {DT_FLOAT, DT_FLOAT});
  auto bad = g.AddNode(wrong);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("has dtype int64 but float32 is expected"), std::string::npos) << bad.status();
  // A value where a variable is needed.
  proto::NodeDef value = Node("value", "SaveShard", {"path", "path"});
  SetAttrStringList(&value, "names", {"p"});
  EXPECT_FALSE(g.AddNode(value).ok());
  // Names and variables must pair up.
  proto::NodeDef names = Node("names", "SaveShard", {"path", "f"});
  SetAttrStringList(&names, "names", {"f", "g"});
  EXPECT_FALSE(g.AddNode(names).ok());
}

}  // namespace
}  // namespace distflow
