#include "placement/placement.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "placement/partition.h"
#include "placement/partition_test_util.h"

namespace distflow {
namespace {

using namespace partition_test;  // NOLINT: the shared graph builders

std::string DeviceOf(const Placed& p, const std::string& node) {
  return p.devices[static_cast<size_t>(p.graph->FindNode(node)->id())];
}

TEST(Placement, ExplicitPartialConstraintsResolve) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:1");
  Const(&g, "c");
  Add(&g, "read", "Identity", {"w"}, "/job:worker/task:1");
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(DeviceOf(p, "w"), kDevices[1]);
  EXPECT_EQ(DeviceOf(p, "c"), kDevices[2]) << "unconstrained nodes go to the client's task";
  EXPECT_EQ(DeviceOf(p, "read"), kDevices[3]);
}

TEST(Placement, AssignIsColocatedWithItsVariable) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Const(&g, "v", "/job:worker/task:0");
  Add(&g, "assign", "Assign", {"w", "v"});
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(DeviceOf(p, "assign"), kDevices[0]);
}

TEST(Placement, ColocationClassPutsANodeWithTheNamedNodeEvenOutsideTheStep) {
  // tf.Variable(callable)'s initial value: no device of its own, "_class":
  // "loc:@w", placed with w; also in a step (the initial value alone) that
  // does not run w.
  proto::GraphDef g;
  proto::NodeDef* init = Const(&g, "w/Initializer/value");
  SetAttrStringList(init, "_class", {"loc:@w"});
  Var(&g, "w", "/job:ps/task:1");
  Const(&g, "other");
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(DeviceOf(p, "w/Initializer/value"), kDevices[1]);
  EXPECT_EQ(DeviceOf(p, "other"), kDevices[2]);
  PlacementOptions o;
  o.devices = kDevices;
  o.default_device = kDevices[2];
  auto alone = PlaceNodes(*p.graph, {p.graph->FindNode("w/Initializer/value")}, o);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ((*alone)[static_cast<size_t>(p.graph->FindNode("w/Initializer/value")->id())], kDevices[1]);
}

TEST(Placement, QueueOpsFollowTheirQueuesDeviceOverTheirOwnRequest) {
  // A queue on a ps, fed and drained by ops that workers asked for: as
  // TensorFlow colocates them with the queue, they run on the ps.
  proto::GraphDef g;
  proto::NodeDef* q = Add(&g, "q", "FIFOQueue", {}, "/job:ps/task:1");
  SetAttrTypeList(q, "component_types", {DT_FLOAT});
  Const(&g, "v", "/job:worker/task:0");
  Add(&g, "enqueue", "QueueEnqueue", {"q", "v"}, "/job:worker/task:0");
  SetAttrTypeList(g.mutable_node(2), "Tcomponents", {DT_FLOAT});
  proto::NodeDef* d = Add(&g, "dequeue", "QueueDequeue", {"q"}, "/job:worker/task:1");
  SetAttrTypeList(d, "component_types", {DT_FLOAT});
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(DeviceOf(p, "enqueue"), kDevices[1]);
  EXPECT_EQ(DeviceOf(p, "dequeue"), kDevices[1]);
  EXPECT_EQ(DeviceOf(p, "v"), kDevices[2]);
}

TEST(Placement, ImpossibleDeviceNamesNodeDevicesAndFix) {
  proto::GraphDef g;
  Var(&g, "b", "/job:ps/task:0/device:CPU:1");
  Placed p = Place(g);
  ASSERT_FALSE(p.status.ok());
  std::string m(p.status.message());
  EXPECT_NE(m.find("Cannot place node 'b' (Variable) on '/job:ps/task:0/device:CPU:1'"), std::string::npos) << m;
  EXPECT_NE(m.find("/job:ps/replica:0/task:0/device:CPU:0"), std::string::npos) << m;
  EXPECT_NE(m.find("allow_soft_placement"), std::string::npos) << m;
}

TEST(Placement, SoftPlacementFallsBackToTheSameTask) {
  proto::GraphDef g;
  Var(&g, "b", "/job:ps/task:0/device:CPU:1");
  Var(&g, "z", "/job:ps/task:7");
  Placed p = Place(g, /*soft=*/true);
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(DeviceOf(p, "b"), kDevices[0]);
  EXPECT_EQ(DeviceOf(p, "z"), kDevices[2]) << "no such task: the default device";
}

// Many tasks: requests naming a task are looked up by task (not matched
// against every device), partial ones still take the first device that
// fits, and the default device is preferred when it fits.
TEST(Placement, ManyTasksResolveByTaskAndPartialRequestsStillMatch) {
  proto::GraphDef g;
  std::vector<std::string> devices;
  for (int t = 0; t < 300; ++t) devices.push_back(absl::StrCat("/job:worker/replica:0/task:", t, "/device:CPU:0"));
  devices.push_back("/job:ps/replica:0/task:0/device:CPU:0");
  for (int t = 0; t < 300; ++t) {
    Const(&g, absl::StrCat("c", t), absl::StrCat("/job:worker/task:", t));
    Const(&g, absl::StrCat("d", t), absl::StrCat("/job:worker/replica:0/task:", t, "/device:CPU:0"));
  }
  Const(&g, "any_worker", "/job:worker");
  Const(&g, "any_ps", "/job:ps");
  Const(&g, "free");
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<const Node*> nodes;
  for (auto& n : (*graph)->nodes()) nodes.push_back(n.get());
  PlacementOptions o;
  o.devices = devices;
  o.default_device = devices[7];
  auto placed = PlaceNodes(**graph, nodes, o);
  ASSERT_TRUE(placed.ok()) << placed.status();
  auto at = [&](const std::string& name) { return (*placed)[static_cast<size_t>((*graph)->FindNode(name)->id())]; };
  for (int t = 0; t < 300; ++t) {
    EXPECT_EQ(at(absl::StrCat("c", t)), devices[static_cast<size_t>(t)]);
    EXPECT_EQ(at(absl::StrCat("d", t)), devices[static_cast<size_t>(t)]);
  }
  EXPECT_EQ(at("any_worker"), devices[7]) << "the default device when it fits";
  EXPECT_EQ(at("any_ps"), devices[300]);
  EXPECT_EQ(at("free"), devices[7]);
  // A task that does not exist is still named, with the devices that do.
  proto::GraphDef bad;
  Const(&bad, "lost", "/job:worker/task:300");
  auto bad_graph = Graph::FromGraphDef(bad);
  ASSERT_TRUE(bad_graph.ok());
  std::vector<const Node*> bad_nodes = {(*bad_graph)->FindNode("lost")};
  auto r = PlaceNodes(**bad_graph, bad_nodes, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lost"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("/job:worker/task:300"), std::string::npos) << r.status();
}

TEST(Partition, CrossingEdgesGetSendRecvPairs) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Add(&g, "a", "Identity", {"w"}, "/job:worker/task:0");
  Add(&g, "b", "Identity", {"w"}, "/job:worker/task:0");
  Add(&g, "n", "NoOp", {"^a"}, "/job:ps/task:0");
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  std::vector<const Node*> nodes;
  for (auto& n : p.graph->nodes()) nodes.push_back(n.get());
  auto parts = PartitionGraph(*p.graph, nodes, p.devices, {}, {{"b", 0}}, {"n"});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  const Partition& ps = parts->at(kDevices[0]);
  const Partition& wk = parts->at(kDevices[2]);
  int sends = 0, recvs = 0;
  for (auto& n : ps.graph.node()) sends += n.op() == "_Send", recvs += n.op() == "_Recv";
  EXPECT_EQ(sends, 1) << "w crosses to the worker once, shared by a and b";
  // n is a target NoOp nothing consumes: a becomes a target of the worker's
  // partition (the step waits for it there) instead of crossing as a token.
  EXPECT_EQ(recvs, 0);
  EXPECT_EQ(ps.task, "/job:ps/replica:0/task:0");
  EXPECT_EQ(wk.fetches, std::vector<std::string>{"b:0"});
  // Both partitions are valid graphs on their own.
  EXPECT_TRUE(Graph::FromGraphDef(ps.graph).ok());
  EXPECT_TRUE(Graph::FromGraphDef(wk.graph).ok());
  EXPECT_NE(std::find(wk.targets.begin(), wk.targets.end(), "a"), wk.targets.end());
  EXPECT_FALSE(OnlyFeedsOtherPartitions(ps)) << "the NoOp target n runs on ps";
  EXPECT_FALSE(OnlyFeedsOtherPartitions(wk)) << "it has a fetch";
}

// The _Recv nodes of a partition, and the tasks they receive from.
std::vector<std::string> RecvsFrom(const Partition& p) {
  std::vector<std::string> from;
  for (auto& n : p.graph.node()) {
    if (n.op() != "_Recv") continue;
    auto task = GetAttrString(n, "send_task");
    from.push_back(task.ok() ? *task : "?");
  }
  return from;
}

const proto::NodeDef* FindIn(const Partition& p, const std::string& name) {
  for (auto& n : p.graph.node())
    if (n.name() == name) return &n;
  return nullptr;
}

// The optimizers' gate: each update waits (control edges) for every
// gradient. A gradient whose tensor already crosses to the update's device
// needs no token; the others on one device cross as one token.
TEST(Partition, ControlEdgesCrossWithTheDataOrAsOneTokenPerDevice) {
  proto::GraphDef g;
  Var(&g, "w1", "/job:ps/task:0");
  Var(&g, "w2", "/job:ps/task:0");
  Const(&g, "g1", "/job:worker/task:0");
  Const(&g, "g2", "/job:worker/task:0");
  Const(&g, "g3", "/job:worker/task:0");
  Add(&g, "u1", "AssignSub", {"w1", "g1", "^g1", "^g2", "^g3"}, "/job:ps/task:0");
  Add(&g, "u2", "AssignSub", {"w2", "g2", "^g1", "^g2", "^g3"}, "/job:ps/task:0");
  Partitioned p = PartitionAll(g, {{"u1", 0}, {"u2", 0}}, {});
  const Partition& ps = p.parts.at(kDevices[0]);
  // g1 and g2 as tensors, then one token after g3 (shared by u1 and u2):
  // not one transfer per control edge (6).
  EXPECT_EQ(RecvsFrom(ps).size(), 3u);
  const proto::NodeDef* u1 = FindIn(ps, "u1");
  ASSERT_NE(u1, nullptr);
  int controls = 0;
  for (const std::string& in : u1->input()) controls += in[0] == '^';
  EXPECT_EQ(controls, 3) << "u1 still waits for all three gradients";
}

// A train_op's group NoOp on the worker, fetched beside a variable on
// ps:1 that depends on it: the read waits for the updates directly, and
// the group, which nothing else consumes, makes the updates targets of
// their partitions instead of receiving a token from each.
TEST(Partition, AGroupNoOpIsLookedThroughAndASinkGroupWaitsThroughTheStep) {
  proto::GraphDef g;
  Var(&g, "w1", "/job:ps/task:0");
  Var(&g, "w2", "/job:ps/task:1");
  Const(&g, "g", "/job:worker/task:0");
  Add(&g, "u1", "AssignSub", {"w1", "g"}, "/job:ps/task:0");
  Add(&g, "u2", "AssignSub", {"w2", "g"}, "/job:ps/task:1");
  Add(&g, "train", "NoOp", {"^u1", "^u2"}, "/job:worker/task:0");
  Add(&g, "after", "Identity", {"w2", "^train"}, "/job:ps/task:1");
  Partitioned p = PartitionAll(g, {{"after", 0}}, {"train"});
  const Partition& ps0 = p.parts.at(kDevices[0]);
  const Partition& ps1 = p.parts.at(kDevices[1]);
  const Partition& wk = p.parts.at(kDevices[2]);
  EXPECT_TRUE(RecvsFrom(wk).empty()) << "the group receives no tokens";
  // ps:1 receives g and one token from ps:0 (u1), none from the worker.
  std::vector<std::string> from = RecvsFrom(ps1);
  std::sort(from.begin(), from.end());
  EXPECT_EQ(from, (std::vector<std::string>{"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}));
  EXPECT_NE(std::find(ps0.targets.begin(), ps0.targets.end(), "u1"), ps0.targets.end());
  EXPECT_NE(std::find(ps1.targets.begin(), ps1.targets.end(), "u2"), ps1.targets.end());
  EXPECT_FALSE(OnlyFeedsOtherPartitions(ps0)) << "the step waits for u1";
  const proto::NodeDef* after = FindIn(ps1, "after");
  ASSERT_NE(after, nullptr);
  EXPECT_NE(std::find(after->input().begin(), after->input().end(), "^u2"), after->input().end());
}

// With control flow every control edge crosses on its own (frames and dead
// tensors follow the edge), as before.
TEST(Partition, WithControlFlowEachControlEdgeCrossesAlone) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Const(&g, "a", "/job:worker/task:0");
  Const(&g, "b", "/job:worker/task:0");
  Add(&g, "pred", "Const", {}, "/job:worker/task:0");
  SetAttrTensor(g.mutable_node(g.node_size() - 1), "value", Tensor::Scalar<bool>(true));
  SetAttrType(g.mutable_node(g.node_size() - 1), "dtype", DT_BOOL);
  Add(&g, "sw", "Switch", {"a", "pred"}, "/job:worker/task:0");
  Add(&g, "n", "Identity", {"w", "^a", "^b"}, "/job:ps/task:0");
  Partitioned p = PartitionAll(g, {{"n", 0}, {"sw", 0}}, {});
  EXPECT_EQ(RecvsFrom(p.parts.at(kDevices[0])).size(), 2u);
}

// Tensors that cross from one task to another partition together travel in
// one call: every _Recv names the whole bundle, its own key included.
TEST(Partition, TensorsBetweenTwoTasksTravelAsOneBundle) {
  proto::GraphDef g;
  Var(&g, "w1", "/job:ps/task:0");
  Var(&g, "w2", "/job:ps/task:0");
  Add(&g, "r1", "Identity", {"w1"}, "/job:ps/task:0");
  Add(&g, "r2", "Identity", {"w2"}, "/job:ps/task:0");
  Add(&g, "sum", "Add", {"r1", "r2"}, "/job:worker/task:0");
  Partitioned p = PartitionAll(g, {{"sum", 0}}, {});
  std::map<std::string, std::vector<std::string>> bundles = Bundles(p.parts.at(kDevices[2]));
  ASSERT_EQ(bundles.size(), 2u);
  std::vector<std::string> keys;
  for (const auto& [key, bundle] : bundles) keys.push_back(key);
  for (const auto& [key, bundle] : bundles) {
    std::vector<std::string> sorted = bundle;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, keys) << key;
  }
  EXPECT_TRUE(Bundles(p.parts.at(kDevices[0])).empty()) << "ps receives nothing";
}

// A tensor computed from what the receiving task sent back (a gradient
// from a looked-up row) cannot wait in one bundle with what that task
// needed first (the ids): each travels alone. Two bundles that would wait
// on each other across tasks are never made either.
TEST(Partition, ATensorThatDependsOnTheReceiverTravelsApart) {
  proto::GraphDef g;
  Var(&g, "table", "/job:ps/task:0");
  Const(&g, "ids", "/job:worker/task:0");
  Add(&g, "rows", "Add", {"table", "ids"}, "/job:ps/task:0");
  Add(&g, "grad", "Neg", {"rows"}, "/job:worker/task:0");
  Add(&g, "update", "AssignSub", {"table", "grad"}, "/job:ps/task:0");
  Partitioned p = PartitionAll(g, {{"update", 0}}, {});
  std::map<std::string, std::vector<std::string>> on_ps = Bundles(p.parts.at(kDevices[0]));
  ASSERT_EQ(on_ps.size(), 2u) << "ids and grad cross";
  for (const auto& [key, bundle] : on_ps) EXPECT_TRUE(bundle.empty()) << key << " travels alone";

  // ps:0 -> worker: x, and y, which needs b, the worker's answer to x: x
  // and y travel alone. Worker -> ps:0: a and b, which y needs together:
  // one bundle.
  proto::GraphDef h;
  Const(&h, "x", "/job:ps/task:0");
  Const(&h, "a", "/job:worker/task:0");
  Add(&h, "b", "Neg", {"x"}, "/job:worker/task:0");
  Add(&h, "y", "Add", {"a", "b"}, "/job:ps/task:0");
  Add(&h, "out", "Add", {"x", "y"}, "/job:worker/task:0");
  Partitioned q = PartitionAll(h, {{"out", 0}}, {});
  std::map<std::string, std::vector<std::string>> on_worker = Bundles(q.parts.at(kDevices[2]));
  ASSERT_EQ(on_worker.size(), 2u);
  for (const auto& [key, bundle] : on_worker) EXPECT_TRUE(bundle.empty()) << key << " travels alone";
  std::map<std::string, std::vector<std::string>> to_ps = Bundles(q.parts.at(kDevices[0]));
  ASSERT_EQ(to_ps.size(), 2u);
  for (const auto& [key, bundle] : to_ps) EXPECT_EQ(bundle.size(), 2u) << key << " travels with the other";
}

TEST(Partition, APartitionThatOnlySendsIsRecognised) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Add(&g, "r", "Identity", {"w"}, "/job:ps/task:0");
  Add(&g, "a", "Identity", {"r"}, "/job:worker/task:0");
  Placed p = Place(g);
  ASSERT_TRUE(p.status.ok()) << p.status;
  std::vector<const Node*> nodes;
  for (auto& n : p.graph->nodes()) nodes.push_back(n.get());
  auto parts = PartitionGraph(*p.graph, nodes, p.devices, {}, {{"a", 0}}, {});
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE(OnlyFeedsOtherPartitions(parts->at(kDevices[0])));
  EXPECT_FALSE(OnlyFeedsOtherPartitions(parts->at(kDevices[2])));
  // A node on ps that nothing consumes (a target doing its own work) spoils it.
  Add(&g, "side", "Identity", {"w"}, "/job:ps/task:0");
  Placed q = Place(g);
  ASSERT_TRUE(q.status.ok()) << q.status;
  std::vector<const Node*> qn;
  for (auto& n : q.graph->nodes()) qn.push_back(n.get());
  auto qparts = PartitionGraph(*q.graph, qn, q.devices, {}, {{"a", 0}}, {"side"});
  ASSERT_TRUE(qparts.ok()) << qparts.status();
  EXPECT_FALSE(OnlyFeedsOtherPartitions(qparts->at(kDevices[0])));
}

}  // namespace
}  // namespace distflow
