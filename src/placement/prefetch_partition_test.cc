// Prefetched variable reads and pushes in the partitioner's output
// (partition.h: MarkPrefetchableReads; transfer_bundles.h): which receives a
// step that prefetches marks, and which transfers still ride with their
// receiver's fetch.
#include <algorithm>
#include <map>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "placement/partition.h"
#include "placement/partition_test_util.h"

namespace distflow {
namespace {

using namespace partition_test;  // NOLINT: the shared graph builders

// Prefetched reads (partition.h): only the step's reads of variables it
// updates, received from another task, and only when the step asks.
TEST(Partition, PrefetchMarksOnlyReadsOfVariablesTheStepUpdates) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");          // updated: its read is marked
  Var(&g, "flag", "/job:ps/task:0");       // only read: never marked
  Var(&g, "local", "/job:worker/task:0");  // updated, but on the reading task
  Add(&g, "w_read", "Identity", {"w"}, "/job:ps/task:0");
  Add(&g, "grad", "Add", {"w_read", "flag"}, "/job:worker/task:0");
  Add(&g, "g2", "Add", {"grad", "local"}, "/job:worker/task:0");
  Add(&g, "apply", "ApplyGradientDescent", {"w", "lr", "g2"}, "/job:ps/task:0");
  proto::NodeDef* lr = Add(&g, "lr", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(lr, "value", Tensor::Scalar<float>(0.1f));
  SetAttrType(lr, "dtype", DT_FLOAT);
  Add(&g, "assign_local", "Assign", {"local", "g2"}, "/job:worker/task:0");
  Add(&g, "train", "NoOp", {"^apply", "^assign_local"}, "/job:worker/task:0");
  proto::NodeDef* marker = Add(&g, "train_prefetching_reads", "NoOp", {"^train"}, "/job:worker/task:0");
  SetAttrBool(marker, kPrefetchVariableReadsAttr, true);

  // Without the marker in the step: nothing is marked.
  Partitioned plain = PartitionAll(g, {}, {"train"});
  std::vector<const Node*> plain_nodes;
  for (auto& n : plain.placed.graph->nodes())
    if (n->name() != "train_prefetching_reads") plain_nodes.push_back(n.get());
  EXPECT_FALSE(StepAllowsStaleReads(plain_nodes));

  Partitioned p = PartitionAll(g, {}, {"train_prefetching_reads"});
  std::vector<const Node*> nodes;
  for (auto& n : p.placed.graph->nodes()) nodes.push_back(n.get());
  ASSERT_TRUE(StepAllowsStaleReads(nodes));
  EXPECT_EQ(MarkPrefetchableReads(nodes, &p.parts), 1);
  std::vector<std::string> marked;
  for (const auto& n : p.parts.at(kDevices[2]).graph.node()) {
    if (n.op() != "_Recv") continue;
    auto on = GetAttrBool(n, kPrefetchRecvAttr);
    if (on.ok() && *on) marked.push_back(*GetAttrString(n, "key"));
  }
  ASSERT_EQ(marked.size(), 1u);
  EXPECT_EQ(marked[0].substr(0, marked[0].find(';')), "w_read") << marked[0];
  // Still valid graphs.
  for (const auto& [device, part] : p.parts) EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;
}

// The looked-up rows a ps sends the worker ride with the ps's fetch of the
// gradients computed from them: one call between the two tasks, not two.
// Tensors the other way that do not depend on what the ps sends are not
// paired (the fetch would wait for nothing it needs).
TEST(Partition, WhatAGradientFetchDependsOnIsPushedWithIt) {
  proto::GraphDef g;
  Var(&g, "table", "/job:ps/task:0");
  Var(&g, "w", "/job:ps/task:0");
  Add(&g, "rows", "Identity", {"table"}, "/job:ps/task:0");
  Add(&g, "w_read", "Identity", {"w"}, "/job:ps/task:0");
  Add(&g, "grad", "Neg", {"rows"}, "/job:worker/task:0");
  Add(&g, "g2", "Neg", {"w_read"}, "/job:worker/task:0");
  Add(&g, "update", "AssignSub", {"table", "grad"}, "/job:ps/task:0");
  Add(&g, "update2", "AssignSub", {"w", "g2"}, "/job:ps/task:0");
  Partitioned p = PartitionAll(g, {}, {"update", "update2"});
  auto on_worker = Pushes(p.parts.at(kDevices[2]));
  auto on_ps = Pushes(p.parts.at(kDevices[0]));
  ASSERT_EQ(on_worker.size(), 2u);
  ASSERT_EQ(on_ps.size(), 2u);
  std::vector<std::string> rows;
  for (const auto& [key, attrs] : on_worker) {
    EXPECT_TRUE(attrs.first) << key << " is pushed";
    EXPECT_TRUE(attrs.second.empty()) << key;
    rows.push_back(key);
  }
  for (const auto& [key, attrs] : on_ps) {
    EXPECT_FALSE(attrs.first) << key;
    std::vector<std::string> push = attrs.second;
    std::sort(push.begin(), push.end());
    EXPECT_EQ(push, rows) << key << "'s fetch carries both";
  }
  for (const auto& [device, part] : p.parts) EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;

  proto::GraphDef h;
  Const(&h, "x", "/job:ps/task:0");
  Const(&h, "a", "/job:worker/task:0");
  Add(&h, "y", "Neg", {"a"}, "/job:ps/task:0");
  Add(&h, "out", "Add", {"x", "x"}, "/job:worker/task:0");
  Partitioned q = PartitionAll(h, {{"out", 0}, {"y", 0}}, {});
  for (const auto& [device, part] : q.parts) {
    for (const auto& [key, attrs] : Pushes(part)) {
      EXPECT_FALSE(attrs.first) << key;
      EXPECT_TRUE(attrs.second.empty()) << key;
    }
  }
}

// A large read of a known shape (which never joins a bundle) rides with
// the ps's fetch of a gradient computed from it, beside the small reads
// that ride there; a large tensor that no fetch needs is not carried.
TEST(Partition, ALargeReadRidesWithTheFetchOfWhatIsComputedFromIt) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  proto::NodeDef* big = Var(&g, "big", "/job:ps/task:0");
  SetAttrShape(big, "shape", PartialShape({1024, 1024}));  // 4 MiB
  Add(&g, "w_read", "Identity", {"w"}, "/job:ps/task:0");
  Add(&g, "big_read", "Identity", {"big"}, "/job:ps/task:0");
  proto::NodeDef* axes = Add(&g, "axes", "Const", {}, "/job:worker/task:0");
  SetAttrTensor(axes, "value", Tensor::FromVector<int32_t>({0, 1}));
  SetAttrType(axes, "dtype", DT_INT32);
  Add(&g, "total", "Sum", {"big_read", "axes"}, "/job:worker/task:0");
  Add(&g, "grad", "Add", {"w_read", "total"}, "/job:worker/task:0");
  proto::NodeDef* lr = Add(&g, "lr", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(lr, "value", Tensor::Scalar<float>(0.1f));
  SetAttrType(lr, "dtype", DT_FLOAT);
  Add(&g, "apply", "ApplyGradientDescent", {"w", "lr", "grad"}, "/job:ps/task:0");
  Add(&g, "big_seen", "Identity", {"big"}, "/job:worker/task:0");
  Partitioned p = PartitionAll(g, {{"big_seen", 0}}, {"apply"});
  std::map<std::string, bool> pushed;
  for (const auto& [key, attrs] : Pushes(p.parts.at(kDevices[2]))) pushed[key.substr(0, key.find(';'))] = attrs.first;
  EXPECT_TRUE(pushed["w_read"]);
  EXPECT_TRUE(pushed["big_read"]) << "it rides with the fetch of grad";
  EXPECT_FALSE(pushed["big"]) << "big_seen's value is needed by no fetch: a call of its own";
  std::vector<std::string> carried;
  for (const auto& [key, attrs] : Pushes(p.parts.at(kDevices[0])))
    for (const std::string& k : attrs.second) carried.push_back(k.substr(0, k.find(';')));
  std::sort(carried.begin(), carried.end());
  EXPECT_EQ(carried, (std::vector<std::string>{"big_read", "w_read"}));
  for (const auto& [key, bundle] : Bundles(p.parts.at(kDevices[2]))) {
    if (key.substr(0, key.find(';')) == "big_read") {
      EXPECT_TRUE(bundle.empty()) << "it joins no bundle";
    }
  }
}

// A step that runs a marker NoOp after the train op's group (prefetch.h)
// instead of the group itself: the group, consumed by the marker only, is a
// sink as the group run alone is, so no token from the updates crosses to
// the worker; the updates become targets of the ps's partition. A group
// that a real node on its device waits for keeps its token.
TEST(Partition, AGroupUnderAMarkerNoOpReceivesNoTokenFromTheUpdates) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Const(&g, "grad", "/job:worker/task:0");
  Add(&g, "update", "AssignSub", {"w", "grad"}, "/job:ps/task:0");
  Add(&g, "train", "NoOp", {"^update"}, "/job:worker/task:0");
  Add(&g, "marker", "NoOp", {"^train"}, "/job:worker/task:0");
  Partitioned p = PartitionAll(g, {}, {"marker"});
  const Partition& ps = p.parts.at(kDevices[0]);
  for (const auto& n : p.parts.at(kDevices[2]).graph.node()) EXPECT_NE(n.op(), "_Recv") << n.name();
  EXPECT_NE(std::find(ps.targets.begin(), ps.targets.end(), "update"), ps.targets.end()) << "the step waits for it";

  Const(&g, "c", "/job:worker/task:0");
  Add(&g, "after", "Identity", {"c", "^train"}, "/job:worker/task:0");
  Partitioned q = PartitionAll(g, {{"after", 0}}, {"marker"});
  int recvs = 0;
  for (const auto& n : q.parts.at(kDevices[2]).graph.node()) recvs += n.op() == "_Recv" ? 1 : 0;
  EXPECT_EQ(recvs, 1) << "`after` sees the update: the token crosses";
}

// A prefetched read that rides with its sender's fetch stays pushed (the
// worker's prefetcher answers it with the value the previous run's push
// brought; this run's comes with the ps's fetch of the gradient): the reads
// make no call of their own, prefetched or not.
TEST(Partition, PrefetchKeepsAPrefetchedReadRidingWithItsSendersFetch) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Var(&g, "flag", "/job:ps/task:0");
  Var(&g, "other", "/job:ps/task:0");
  Add(&g, "w_read", "Identity", {"w"}, "/job:ps/task:0");
  Add(&g, "grad", "Add", {"w_read", "flag"}, "/job:worker/task:0");
  Add(&g, "grad2", "Add", {"grad", "other"}, "/job:worker/task:0");
  proto::NodeDef* lr = Add(&g, "lr", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(lr, "value", Tensor::Scalar<float>(0.1f));
  SetAttrType(lr, "dtype", DT_FLOAT);
  Add(&g, "apply", "ApplyGradientDescent", {"w", "lr", "grad2"}, "/job:ps/task:0");
  Add(&g, "train", "NoOp", {"^apply"}, "/job:worker/task:0");
  proto::NodeDef* marker = Add(&g, "train_prefetching_reads", "NoOp", {"^train"}, "/job:worker/task:0");
  SetAttrBool(marker, kPrefetchVariableReadsAttr, true);
  Partitioned p = PartitionAll(g, {}, {"train_prefetching_reads"});
  auto riding = [&] {
    std::vector<std::string> keys;
    for (const auto& [key, attrs] : Pushes(p.parts.at(kDevices[2])))
      if (attrs.first) keys.push_back(key.substr(0, key.find(';')));
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  const std::vector<std::string> all = {"flag", "other", "w_read"};
  ASSERT_EQ(riding(), all) << "they ride with the fetch of grad2";
  std::vector<const Node*> nodes;
  for (auto& n : p.placed.graph->nodes()) nodes.push_back(n.get());
  EXPECT_EQ(MarkPrefetchableReads(nodes, &p.parts), 1);
  EXPECT_EQ(riding(), all) << "the push is kept";
  for (const auto& n : p.parts.at(kDevices[2]).graph.node()) {
    if (n.op() != "_Recv") continue;
    auto on = GetAttrBool(n, kPrefetchRecvAttr);
    const std::string key = *GetAttrString(n, "key");
    EXPECT_EQ(on.ok() && *on, key.substr(0, key.find(';')) == "w_read") << key;
  }
  int pushing = 0;
  for (const auto& [key, attrs] : Pushes(p.parts.at(kDevices[0]))) pushing += attrs.second.size() == 3 ? 1 : 0;
  EXPECT_EQ(pushing, 1) << "the ps's fetch of grad2 still carries all three";
  for (const auto& [device, part] : p.parts) EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;
}

// A prefetched read in a bundle that its receiver fetches (answered by the
// prefetcher, one receive at a time) leaves the bundle, and a push that
// fetch carried is undone whole: the tensors that rode with it are fetched
// by their receiver again.
TEST(Partition, PrefetchUndoesAPushWhoseFetchBringsAPrefetchedRead) {
  proto::GraphDef g;
  Var(&g, "w", "/job:ps/task:0");
  Add(&g, "w_read", "Identity", {"w"}, "/job:ps/task:0");
  Const(&g, "x", "/job:worker/task:0");
  Add(&g, "y", "Neg", {"x"}, "/job:ps/task:0");
  Add(&g, "out", "Add", {"w_read", "y"}, "/job:worker/task:0");
  Const(&g, "c", "/job:ps/task:0");
  proto::NodeDef* lr = Add(&g, "lr", "Const", {}, "/job:ps/task:0");
  SetAttrTensor(lr, "value", Tensor::Scalar<float>(0.1f));
  SetAttrType(lr, "dtype", DT_FLOAT);
  Add(&g, "apply", "ApplyGradientDescent", {"w", "lr", "c"}, "/job:ps/task:0");
  proto::NodeDef* marker = Add(&g, "train_prefetching_reads", "NoOp", {"^apply"}, "/job:worker/task:0");
  SetAttrBool(marker, kPrefetchVariableReadsAttr, true);
  Partitioned p = PartitionAll(g, {{"out", 0}}, {"train_prefetching_reads"});
  int pushed = 0;
  for (const auto& [key, attrs] : Pushes(p.parts.at(kDevices[0]))) pushed += attrs.first ? 1 : 0;
  ASSERT_EQ(pushed, 1) << "x rides with the worker's fetch of w_read and y";
  std::vector<const Node*> nodes;
  for (auto& n : p.placed.graph->nodes()) nodes.push_back(n.get());
  EXPECT_EQ(MarkPrefetchableReads(nodes, &p.parts), 1);
  for (const auto& [device, part] : p.parts) {
    for (const auto& [key, attrs] : Pushes(part)) {
      EXPECT_FALSE(attrs.first) << key;
      EXPECT_TRUE(attrs.second.empty()) << key;
    }
    for (const auto& [key, bundle] : Bundles(part)) EXPECT_TRUE(bundle.empty()) << key << " travels alone";
    EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;
  }
}

}  // namespace
}  // namespace distflow
