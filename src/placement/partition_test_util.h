// Graph builders shared by the placement layer's tests (placement_test.cc,
// prefetch_partition_test.cc): nodes added by name, op and device, placed
// on a 2 ps + 2 worker cluster and partitioned, and the transfer attrs of a
// partition's _Recv nodes. Test-only; not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "placement/partition.h"
#include "placement/placement.h"

namespace distflow {
namespace partition_test {

inline proto::NodeDef* Add(proto::GraphDef* g, const std::string& name, const std::string& op,
                           std::vector<std::string> inputs, const std::string& device = "") {
  proto::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device(device);
  for (auto& i : inputs) n->add_input(i);
  return n;
}

inline proto::NodeDef* Var(proto::GraphDef* g, const std::string& name, const std::string& device) {
  proto::NodeDef* n = Add(g, name, "Variable", {}, device);
  SetAttrShape(n, "shape", PartialShape({2}));
  SetAttrType(n, "dtype", DT_FLOAT);
  return n;
}

inline proto::NodeDef* Const(proto::GraphDef* g, const std::string& name, const std::string& device = "") {
  proto::NodeDef* n = Add(g, name, "Const", {}, device);
  SetAttrTensor(n, "value", Tensor::FromVector<float>({1, 2}));
  SetAttrType(n, "dtype", DT_FLOAT);
  return n;
}

inline const std::vector<std::string> kDevices = {
    "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
    "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"};

struct Placed {
  std::unique_ptr<Graph> graph;
  std::vector<std::string> devices;
  absl::Status status;
};

inline Placed Place(const proto::GraphDef& g, bool soft = false) {
  Placed p;
  auto graph = Graph::FromGraphDef(g);
  EXPECT_TRUE(graph.ok()) << graph.status();
  p.graph = std::move(*graph);
  std::vector<const Node*> nodes;
  for (auto& n : p.graph->nodes()) nodes.push_back(n.get());
  PlacementOptions o;
  o.devices = kDevices;
  o.default_device = kDevices[2];
  o.allow_soft_placement = soft;
  auto r = PlaceNodes(*p.graph, nodes, o);
  p.status = r.status();
  if (r.ok()) p.devices = *r;
  return p;
}

struct Partitioned {
  Placed placed;
  std::map<std::string, Partition> parts;
};

inline Partitioned PartitionAll(const proto::GraphDef& g, const std::vector<TensorId>& fetches,
                                const std::vector<std::string>& targets) {
  Partitioned out;
  out.placed = Place(g);
  EXPECT_TRUE(out.placed.status.ok()) << out.placed.status;
  std::vector<const Node*> nodes;
  for (auto& n : out.placed.graph->nodes()) nodes.push_back(n.get());
  auto parts = PartitionGraph(*out.placed.graph, nodes, out.placed.devices, {}, fetches, targets);
  EXPECT_TRUE(parts.ok()) << parts.status();
  if (parts.ok()) out.parts = std::move(*parts);
  for (const auto& [device, part] : out.parts) EXPECT_TRUE(Graph::FromGraphDef(part.graph).ok()) << device;
  return out;
}

// The `bundle` attr of each _Recv of a partition, by the name of the node
// it feeds (its first consumer), "" for a _Recv of its own.
inline std::map<std::string, std::vector<std::string>> Bundles(const Partition& p) {
  std::map<std::string, std::vector<std::string>> out;
  for (auto& n : p.graph.node()) {
    if (n.op() != "_Recv") continue;
    auto key = GetAttrString(n, "key");
    auto bundle = GetAttrStringList(n, "bundle");
    out[key.ok() ? *key : "?"] = bundle.ok() ? *bundle : std::vector<std::string>{};
  }
  return out;
}

// The attrs of a partition's _Recv nodes, by key: whether it is pushed,
// and the keys its fetch pushes.
inline std::map<std::string, std::pair<bool, std::vector<std::string>>> Pushes(const Partition& p) {
  std::map<std::string, std::pair<bool, std::vector<std::string>>> out;
  for (auto& n : p.graph.node()) {
    if (n.op() != "_Recv") continue;
    auto key = GetAttrString(n, "key");
    auto pushed = GetAttrBool(n, "pushed");
    auto push = GetAttrStringList(n, "push");
    out[key.ok() ? *key : "?"] = {pushed.ok() && *pushed, push.ok() ? *push : std::vector<std::string>{}};
  }
  return out;
}

}  // namespace partition_test
}  // namespace distflow
