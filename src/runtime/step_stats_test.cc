#include "distflow/step_stats.h"

#include <map>
#include <set>
#include <tuple>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/graph_def_builder_for_test.h"
#include "runtime/local_session.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;

// The trace's events, parsed by protobuf's JSON parser (a real parser, so a
// malformed document fails here).
std::vector<google::protobuf::Struct> ParseEvents(const std::string& json) {
  google::protobuf::Struct doc;
  auto st = google::protobuf::util::JsonStringToMessage(json, &doc);
  EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << json;
  std::vector<google::protobuf::Struct> events;
  auto it = doc.fields().find("traceEvents");
  if (it == doc.fields().end()) {
    ADD_FAILURE() << "no traceEvents in\n" << json;
    return events;
  }
  for (const auto& v : it->second.list_value().values()) events.push_back(v.struct_value());
  return events;
}

std::string Str(const google::protobuf::Struct& e, const std::string& f) {
  auto it = e.fields().find(f);
  return it == e.fields().end() ? "" : it->second.string_value();
}
double Num(const google::protobuf::Struct& e, const std::string& f) {
  auto it = e.fields().find(f);
  return it == e.fields().end() ? -1 : it->second.number_value();
}

TEST(StepStats, ATracedLocalRunRecordsEveryNodeItRan) {
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(2));
  AddConst(&g, "b", Tensor::Scalar<float>(3));
  AddNode(&g, "sum", "Add", {"a", "b"});
  AddNode(&g, "product", "Mul", {"sum", "b"});
  AddNode(&g, "unused", "Neg", {"a"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  StepStats trace;
  RunOptions ro;
  ro.trace = &trace;
  auto out = s.Run(ro, {}, {"product"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].scalar<float>(), 15);
  ASSERT_EQ(trace.devices.size(), 1u);
  EXPECT_EQ(trace.devices[0].device, s.device()->name());
  std::map<std::string, NodeExecStats> by_name;
  for (const NodeExecStats& n : trace.devices[0].nodes) by_name[n.node] = n;
  ASSERT_EQ(by_name.size(), 4u) << "a, b, sum, product; not the pruned 'unused'";
  EXPECT_EQ(by_name["sum"].op, "Add");
  EXPECT_LE(by_name["sum"].start_us, by_name["sum"].end_us);
  // Dependencies order the records: product starts after sum ended.
  EXPECT_GE(by_name["product"].start_us, by_name["sum"].end_us);
  EXPECT_GT(by_name["a"].start_us, 1'600'000'000'000'000) << "wall clock microseconds";
}

TEST(StepStats, ChromeTraceHasATrackPerDeviceLanesThatNeverOverlapAndLinkedTransfers) {
  StepStats st;
  const int64_t t0 = 1'700'000'000'000'000;
  // At t0+25 the receive, x and y run at once on the worker: three lanes; z
  // and `later` fit into the receive's lane after it ended.
  st.devices.push_back({"/job:worker/replica:0/task:0/device:CPU:0",
                        {{"x", "MatMul", t0 + 10, t0 + 50, ""},
                         {"y", "Relu", t0 + 20, t0 + 30, ""},
                         {"z", "Add", t0 + 45, t0 + 60, ""},
                         {"later", "Sum", t0 + 70, t0 + 80, ""},
                         {"_xfer0_recv", "_Recv", t0 + 5, t0 + 40, "w;0;/job:ps;/job:worker"}}});
  st.devices.push_back({"/job:ps/replica:0/task:0/device:CPU:0",
                        {{"w", "Variable", t0, t0 + 1, ""},
                         {"_xfer0_send", "_Send", t0 + 2, t0 + 3, "w;0;/job:ps;/job:worker"},
                         {"odd \"name\"\n", "NoOp", t0 + 4, t0 + 4, ""}}});
  std::vector<google::protobuf::Struct> events = ParseEvents(ChromeTraceJson(st));

  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> lanes;
  std::map<int, std::pair<int, int>> flow_start, flow_end;  // id -> (pid, tid)
  std::set<std::string> names;
  for (const auto& e : events) {
    const std::string ph = Str(e, "ph");
    const int pid = static_cast<int>(Num(e, "pid"));
    if (ph == "M" && Str(e, "name") == "process_name") {
      process_names[pid] = e.fields().at("args").struct_value().fields().at("name").string_value();
    } else if (ph == "X") {
      lanes[{pid, static_cast<int>(Num(e, "tid"))}].push_back({Num(e, "ts"), Num(e, "ts") + Num(e, "dur")});
      names.insert(e.fields().at("args").struct_value().fields().at("name").string_value());
      EXPECT_GE(Num(e, "ts"), 0) << "times are relative to the step's first start";
    } else if (ph == "s") {
      flow_start[static_cast<int>(Num(e, "id"))] = {pid, static_cast<int>(Num(e, "tid"))};
    } else if (ph == "f") {
      flow_end[static_cast<int>(Num(e, "id"))] = {pid, static_cast<int>(Num(e, "tid"))};
    }
  }
  ASSERT_EQ(process_names.size(), 2u);
  EXPECT_EQ(process_names[1], "/job:ps/replica:0/task:0/device:CPU:0") << "devices in name order";
  EXPECT_EQ(names.size(), 8u);
  EXPECT_TRUE(names.count("odd \"name\"\n")) << "names are escaped and survive parsing";
  int worker_lanes = 0;
  for (auto& [track, spans] : lanes) {
    if (track.first == 2) ++worker_lanes;
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlap on pid " << track.first << " tid " << track.second;
    }
  }
  EXPECT_EQ(worker_lanes, 3) << "three nodes at once need three lanes, no more";
  ASSERT_EQ(flow_start.size(), 1u);
  ASSERT_EQ(flow_end.size(), 1u);
  EXPECT_EQ(flow_start.begin()->second.first, 1) << "the flow starts on the ps";
  EXPECT_EQ(flow_end.begin()->second.first, 2) << "and ends on the worker";
}

// A collective's phase records ("node:phase activity", op CollectivePhase)
// are drawn inside their op's slice, in its lane, named by the phase: the
// viewer nests them under the op. A phase whose op has no record is left out.
TEST(StepStats, ChromeTraceNestsACollectivesPhasesInsideItsOp) {
  StepStats st;
  const int64_t t0 = 1'700'000'000'000'000;
  st.devices.push_back({"/job:worker/replica:0/task:1/device:CPU:0",
                        {{"grad", "MatMul", t0, t0 + 100, ""},
                         {"allreduce_0", "CollectiveReduce", t0 + 10, t0 + 60, ""},
                         {"allreduce_0:reduce-scatter waiting", "CollectivePhase", t0 + 12, t0 + 20, ""},
                         {"allreduce_0:reduce-scatter reducing", "CollectivePhase", t0 + 20, t0 + 30, ""},
                         {"allreduce_0:all-gather copying", "CollectivePhase", t0 + 30, t0 + 70, ""},
                         {"gone:exchange waiting", "CollectivePhase", t0 + 5, t0 + 6, ""}}});
  std::vector<google::protobuf::Struct> events = ParseEvents(ChromeTraceJson(st));
  double op_tid = -1, op_ts = -1, op_end = -1;
  for (const auto& e : events)
    if (Str(e, "ph") == "X" && Str(e, "name") == "CollectiveReduce") {
      op_tid = Num(e, "tid");
      op_ts = Num(e, "ts");
      op_end = op_ts + Num(e, "dur");
    }
  ASSERT_GE(op_tid, 0) << "the op's own slice";
  std::vector<std::string> phases;
  for (const auto& e : events) {
    if (Str(e, "ph") != "X" || Str(e, "cat") != "Collective") continue;
    phases.push_back(Str(e, "name"));
    EXPECT_EQ(Num(e, "tid"), op_tid) << Str(e, "name") << " sits in its op's lane";
    EXPECT_GE(Num(e, "ts"), op_ts) << Str(e, "name");
    EXPECT_LE(Num(e, "ts") + Num(e, "dur"), op_end) << Str(e, "name") << " is clipped to its op";
    EXPECT_EQ(e.fields().at("args").struct_value().fields().at("name").string_value(), "allreduce_0");
  }
  EXPECT_EQ(phases,
            (std::vector<std::string>{"reduce-scatter waiting", "reduce-scatter reducing", "all-gather copying"}));
}

TEST(StepStats, AnEmptyTraceIsStillAValidDocument) { EXPECT_TRUE(ParseEvents(ChromeTraceJson(StepStats{})).empty()); }

}  // namespace
}  // namespace distflow
