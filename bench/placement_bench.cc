// The master's per-step graph work at cluster scale (issue 30): building
// the Graph from a GraphDef, pruning it for the step, placing every node
// and cutting it into one partition per task, for a model-shaped graph of
// N nodes over T tasks (T/10 ps tasks holding the variables, the rest
// workers each reading one variable, computing a chain of ops, and sending
// its result to worker 0, which sums them). Simulated, in one process: no
// task is started. Each case reports the time per phase; doubling N and T
// together should double them, and anything growing faster is quadratic in
// the cluster size.
//
//   build/bench/placement_bench [--benchmark_filter=...]
#include <time.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "placement/partition.h"
#include "placement/placement.h"

namespace distflow {
namespace {

std::string Device(const std::string& job, int task) {
  return absl::StrCat("/job:", job, "/replica:0/task:", task, "/device:CPU:0");
}

proto::NodeDef* Add(proto::GraphDef* g, const std::string& name, const std::string& op,
                    const std::vector<std::string>& inputs, const std::string& device) {
  proto::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device(device);
  for (const std::string& i : inputs) n->add_input(i);
  SetAttrType(n, "T", DT_FLOAT);
  return n;
}

struct Cluster {
  proto::GraphDef graph;
  std::vector<std::string> devices;
  std::vector<std::string> targets;
  int num_ps = 0, num_workers = 0;
};

// About `nodes` nodes over `tasks` tasks.
Cluster MakeCluster(int nodes, int tasks) {
  Cluster c;
  c.num_ps = std::max(1, tasks / 10);
  c.num_workers = std::max(1, tasks - c.num_ps);
  for (int p = 0; p < c.num_ps; ++p) c.devices.push_back(Device("ps", p));
  for (int w = 0; w < c.num_workers; ++w) c.devices.push_back(Device("worker", w));
  for (int p = 0; p < c.num_ps; ++p) {
    proto::NodeDef* v = Add(&c.graph, absl::StrCat("var", p), "Variable", {}, Device("ps", p));
    v->mutable_attr()->erase("T");
    SetAttrShape(v, "shape", PartialShape({2}));
    SetAttrType(v, "dtype", DT_FLOAT);
  }
  // Per worker: a read of one variable, a chain, and its result.
  const int chain = std::max(1, (nodes - c.num_ps - 1) / c.num_workers - 2);
  std::vector<std::string> results;
  for (int w = 0; w < c.num_workers; ++w) {
    const std::string dev = Device("worker", w);
    std::string prev = absl::StrCat("w", w, "/read");
    Add(&c.graph, prev, "Identity", {absl::StrCat("var", w % c.num_ps)}, dev);
    for (int i = 0; i < chain; ++i) {
      const std::string name = absl::StrCat("w", w, "/op", i);
      Add(&c.graph, name, "Add", {prev, prev}, dev);
      prev = name;
    }
    const std::string out = absl::StrCat("w", w, "/out");
    Add(&c.graph, out, "Identity", {prev}, dev);
    results.push_back(out);
  }
  proto::NodeDef* sum = Add(&c.graph, "total", "AddN", results, Device("worker", 0));
  SetAttrInt(sum, "N", static_cast<int64_t>(results.size()));
  c.targets = {"total"};
  return c;
}

// This thread's CPU time in ms: the machine is shared, so wall time would
// count other processes' work.
double ThreadCpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

void BM_MasterGraphWork(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int tasks = static_cast<int>(state.range(1));
  Cluster c = MakeCluster(nodes, tasks);
  double build = 0, prune = 0, place = 0, partition = 0;
  size_t partitions = 0;
  int64_t graph_nodes = 0;
  for (auto _ : state) {
    auto t0 = ThreadCpuNow();
    absl::StatusOr<std::unique_ptr<Graph>> g = Graph::FromGraphDef(c.graph);
    if (!g.ok()) {
      state.SkipWithError(g.status().ToString().c_str());
      return;
    }
    auto t1 = ThreadCpuNow();
    absl::StatusOr<std::vector<const Node*>> kept = PruneForStep(**g, {}, {}, c.targets);
    if (!kept.ok()) {
      state.SkipWithError(kept.status().ToString().c_str());
      return;
    }
    auto t2 = ThreadCpuNow();
    PlacementOptions o;
    o.devices = c.devices;
    o.default_device = Device("worker", 0);
    absl::StatusOr<std::vector<std::string>> placed = PlaceNodes(**g, *kept, o);
    if (!placed.ok()) {
      state.SkipWithError(placed.status().ToString().c_str());
      return;
    }
    auto t3 = ThreadCpuNow();
    absl::StatusOr<std::map<std::string, Partition>> parts = PartitionGraph(**g, *kept, *placed, {}, {}, c.targets);
    if (!parts.ok()) {
      state.SkipWithError(parts.status().ToString().c_str());
      return;
    }
    auto t4 = ThreadCpuNow();
    auto ms = [](double a, double b) { return b - a; };
    build += ms(t0, t1);
    prune += ms(t1, t2);
    place += ms(t2, t3);
    partition += ms(t3, t4);
    partitions = parts->size();
    graph_nodes = (*g)->num_nodes();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(graph_nodes);
  state.counters["partitions"] = static_cast<double>(partitions);
  state.counters["build_ms"] = build / n;
  state.counters["prune_ms"] = prune / n;
  state.counters["place_ms"] = place / n;
  state.counters["partition_ms"] = partition / n;
}

BENCHMARK(BM_MasterGraphWork)
    ->ArgNames({"nodes", "tasks"})
    ->Args({1250, 125})
    ->Args({2500, 250})
    ->Args({5000, 500})
    ->Args({10000, 1000})
    ->Args({20000, 2000})
    ->MinTime(2.0)  // several rounds even of the largest, so first-touch page faults average out
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace distflow

BENCHMARK_MAIN();
