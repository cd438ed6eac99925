// Deferred variable updates on the master's side (deferred_updates.h): which
// control edges a deferring step drops, and which partitions may answer
// before their updates have run.
#include "placement/deferred_updates.h"

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "placement/partition.h"
#include "placement/partition_test_util.h"
#include "placement/placement.h"

namespace distflow {
namespace {

const std::vector<std::string> kDevices = {"/job:ps/replica:0/task:0/device:CPU:0",
                                           "/job:worker/replica:0/task:0/device:CPU:0"};
const std::string& kPs = kDevices[0];
const std::string& kWorker = kDevices[1];

using partition_test::Add;

void Var(proto::GraphDef* g, const std::string& name) {
  proto::NodeDef* n = Add(g, name, "Variable", {}, "/job:ps/task:0");
  SetAttrShape(n, "shape", PartialShape({2}));
  SetAttrType(n, "dtype", DT_FLOAT);
}

// The book's training step in miniature: the worker computes a gradient
// from w, the ps applies it, the worker's train op groups the update, a
// fetch reads the stop flag after it, and the step runs the marker.
proto::GraphDef TrainingStep() {
  proto::GraphDef g;
  Var(&g, "w");
  Var(&g, "stop");
  proto::NodeDef* lr = Add(&g, "lr", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(lr, "value", Tensor::Scalar<float>(0.1f));
  SetAttrType(lr, "dtype", DT_FLOAT);
  Add(&g, "w_read", "Identity", {"w"}, "/job:worker/task:0");
  Add(&g, "grad", "Add", {"w_read", "w_read"}, "/job:worker/task:0");
  Add(&g, "apply", "ApplyGradientDescent", {"w", "lr", "grad"}, "/job:ps/task:0");
  Add(&g, "update", "NoOp", {"^apply"}, "/job:worker/task:0");
  Add(&g, "stop_seen", "Identity", {"stop", "^update"}, "/job:worker/task:0");
  proto::NodeDef* marker = Add(&g, "deferring", "NoOp", {"^update"}, "/job:worker/task:0");
  SetAttrBool(marker, kDeferVariableUpdatesAttr, true);
  return g;
}

struct Step {
  std::unique_ptr<Graph> graph;
  std::vector<const Node*> nodes;
  std::map<std::string, Partition> parts;
};

Step Partitioned(const proto::GraphDef& g, bool defer, const std::vector<TensorId>& fetches) {
  Step s;
  auto graph = Graph::FromGraphDef(g);
  EXPECT_TRUE(graph.ok()) << graph.status();
  s.graph = std::move(*graph);
  for (auto& n : s.graph->nodes()) s.nodes.push_back(n.get());
  PlacementOptions o;
  o.devices = kDevices;
  o.default_device = kWorker;
  auto placed = PlaceNodes(*s.graph, s.nodes, o);
  EXPECT_TRUE(placed.ok()) << placed.status();
  PartitionOptions po;
  po.defer_updates = defer;
  auto parts = PartitionGraph(*s.graph, s.nodes, *placed, {}, fetches, {"deferring"}, po);
  EXPECT_TRUE(parts.ok()) << parts.status();
  if (parts.ok()) s.parts = std::move(*parts);
  for (const auto& [device, part] : s.parts) EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;
  return s;
}

// Control tokens the partition receives (their keys start with "^").
int ControlRecvs(const Partition& p) {
  int n = 0;
  for (const auto& node : p.graph.node()) {
    auto key = GetAttrString(node, "key");
    if (node.op() == "_Recv" && key.ok() && !key->empty() && (*key)[0] == '^') ++n;
  }
  return n;
}

bool Targets(const Partition& p, const std::string& node) {
  return std::find(p.targets.begin(), p.targets.end(), node) != p.targets.end();
}

TEST(DeferredUpdates, TheWorkerNoLongerWaitsForTheUpdateWhichBecomesAPsTarget) {
  Step plain = Partitioned(TrainingStep(), /*defer=*/false, {{"stop_seen", 0}});
  ASSERT_TRUE(StepDefersUpdates(plain.nodes));
  EXPECT_EQ(ControlRecvs(plain.parts.at(kWorker)), 1) << "without deferral the worker waits for the update";

  Step s = Partitioned(TrainingStep(), /*defer=*/true, {{"stop_seen", 0}});
  EXPECT_EQ(ControlRecvs(s.parts.at(kWorker)), 0);
  EXPECT_TRUE(Targets(s.parts.at(kPs), "apply")) << "the update still runs, as a target of its own partition";
  // `update` waits for the gradient instead, on its own task.
  for (const auto& n : s.parts.at(kWorker).graph.node()) {
    if (n.name() != "update") continue;
    ASSERT_EQ(n.input_size(), 1);
    EXPECT_EQ(n.input(0), "^grad");
  }
  ASSERT_TRUE(MarkDeferredUpdates(*s.graph, &s.parts).ok());
  EXPECT_TRUE(s.parts.at(kPs).defer_updates);
  EXPECT_FALSE(s.parts.at(kWorker).defer_updates) << "the worker has no update to defer";
}

TEST(DeferredUpdates, ANodeWhoseConsumersRunOnThePsKeepsWaitingForTheUpdate) {
  proto::GraphDef g = TrainingStep();
  // Read on the ps after `update`: it must see the update.
  Add(&g, "w_after", "Identity", {"w", "^stop_seen"}, "/job:ps/task:0");
  Step s = Partitioned(g, /*defer=*/true, {{"w_after", 0}});
  EXPECT_EQ(ControlRecvs(s.parts.at(kWorker)), 1);
}

TEST(DeferredUpdates, AStepWhoseLeftoverWorkIsNotAnUpdateIsNotDeferred) {
  proto::GraphDef g = TrainingStep();
  // A synchronous replica's accumulator, fed the gradient on the ps, that
  // the update waits for: stateful, not a variable update.
  proto::NodeDef* step = Add(&g, "local_step", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(step, "value", Tensor::Scalar<int64_t>(0));
  SetAttrType(step, "dtype", DT_INT64);
  proto::NodeDef* acc = Add(&g, "acc_apply", "AccumulatorApplyGradient", {"local_step", "grad"}, "/job:ps/task:0");
  SetAttrType(acc, "T", DT_FLOAT);
  SetAttrString(acc, "shared_name", "acc");
  SetAttrInt(acc, "replica_id", 0);
  for (auto& n : *g.mutable_node())
    if (n.name() == "apply") n.add_input("^acc_apply");
  Step s = Partitioned(g, /*defer=*/true, {{"stop_seen", 0}});
  absl::Status marked = MarkDeferredUpdates(*s.graph, &s.parts);
  ASSERT_FALSE(marked.ok());
  EXPECT_NE(marked.message().find("acc_apply"), std::string::npos) << marked;
  EXPECT_NE(marked.message().find("/job:ps/replica:0/task:0"), std::string::npos) << marked;
}

TEST(DeferredUpdates, AStepWithoutARemoteUpdateHasNothingToDefer) {
  proto::GraphDef g;
  Var(&g, "w");
  Add(&g, "read", "Identity", {"w"}, "/job:worker/task:0");
  proto::NodeDef* marker = Add(&g, "deferring", "NoOp", {"^read"}, "/job:worker/task:0");
  SetAttrBool(marker, kDeferVariableUpdatesAttr, true);
  Step s = Partitioned(g, /*defer=*/true, {{"read", 0}});
  EXPECT_FALSE(MarkDeferredUpdates(*s.graph, &s.parts).ok());
}

}  // namespace
}  // namespace distflow
