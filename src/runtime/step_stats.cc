#include "distflow/step_stats.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace distflow {

int64_t StepStats::num_nodes() const {
  int64_t n = 0;
  for (const DeviceStepStats& d : devices) n += static_cast<int64_t>(d.nodes.size());
  return n;
}

void StepStatsCollector::Record(NodeExecStats stats) {
  absl::MutexLock lock(&mu_);
  nodes_.push_back(std::move(stats));
}

std::vector<NodeExecStats> StepStatsCollector::Take() {
  absl::MutexLock lock(&mu_);
  return std::move(nodes_);
}

namespace {

// A JSON string literal (RFC 8259): quotes, backslashes and control
// characters escaped; other bytes pass through.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// The op of a collective's phase records (collective/run_observer.h).
constexpr char kPhaseOp[] = "CollectivePhase";

struct Placed {
  const NodeExecStats* node;
  int pid;
  int lane;
};

}  // namespace

std::string ChromeTraceJson(const StepStats& stats) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const DeviceStepStats& d : stats.devices)
    for (const NodeExecStats& n : d.nodes) origin = std::min(origin, n.start_us);
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;

  std::vector<std::string> events;
  std::vector<Placed> placed;
  // Devices in name order, so a task's devices sit together.
  std::vector<const DeviceStepStats*> devices;
  for (const DeviceStepStats& d : stats.devices) devices.push_back(&d);
  std::stable_sort(devices.begin(), devices.end(),
                   [](const DeviceStepStats* a, const DeviceStepStats* b) { return a->device < b->device; });
  int pid = 0;
  for (const DeviceStepStats* d : devices) {
    ++pid;
    events.push_back(
        absl::StrCat(R"({"name":"process_name","ph":"M","pid":)", pid, R"(,"args":{"name":)", Quote(d->device), "}}"));
    events.push_back(
        absl::StrCat(R"({"name":"process_sort_index","ph":"M","pid":)", pid, R"(,"args":{"sort_index":)", pid, "}}"));
    std::vector<const NodeExecStats*> nodes, phases;
    for (const NodeExecStats& n : d->nodes) (n.op == kPhaseOp ? phases : nodes).push_back(&n);
    std::stable_sort(nodes.begin(), nodes.end(), [](const NodeExecStats* a, const NodeExecStats* b) {
      return a->start_us != b->start_us ? a->start_us < b->start_us : a->end_us < b->end_us;
    });
    // Greedy interval partitioning: each node goes to the first lane that is
    // free at its start, so the lanes of a device never overlap.
    std::vector<int64_t> lane_end;
    for (const NodeExecStats* n : nodes) {
      const int64_t end = std::max(n->end_us, n->start_us);
      size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > n->start_us) ++lane;
      if (lane == lane_end.size()) {
        lane_end.push_back(end);
        events.push_back(absl::StrCat(R"({"name":"thread_name","ph":"M","pid":)", pid, R"(,"tid":)", lane,
                                      R"(,"args":{"name":"lane )", lane, "\"}}"));
      } else {
        lane_end[lane] = end;
      }
      placed.push_back({n, pid, static_cast<int>(lane)});
      events.push_back(absl::StrCat(R"({"name":)", Quote(n->op), R"(,"cat":"Op","ph":"X","pid":)", pid, R"(,"tid":)",
                                    lane, R"(,"ts":)", n->start_us - origin, R"(,"dur":)", end - n->start_us,
                                    R"(,"args":{"name":)", Quote(n->node), R"(,"op":)", Quote(n->op), "}}"));
    }
    // A collective's phases ("node:phase activity") go inside their op's
    // slice, in its lane, clipped to it, so the viewer nests them under it.
    for (const NodeExecStats* p : phases) {
      const size_t colon = p->node.find(':');
      const std::string owner = p->node.substr(0, colon);
      const std::string label = colon == std::string::npos ? p->node : p->node.substr(colon + 1);
      const Placed* parent = nullptr;
      for (const Placed& q : placed) {
        if (q.pid == pid && q.node->node == owner && q.node->start_us <= p->start_us &&
            p->start_us <= std::max(q.node->end_us, q.node->start_us)) {
          parent = &q;
        }
      }
      if (parent == nullptr) continue;  // its op's record is missing (a failed step): nothing to nest under
      const int64_t start = p->start_us, end = std::min(std::max(p->end_us, start), parent->node->end_us);
      events.push_back(absl::StrCat(R"({"name":)", Quote(label), R"(,"cat":"Collective","ph":"X","pid":)", pid,
                                    R"(,"tid":)", parent->lane, R"(,"ts":)", start - origin, R"(,"dur":)", end - start,
                                    R"(,"args":{"name":)", Quote(owner), R"(,"phase":)", Quote(label), "}}"));
    }
  }
  // Flows: each transfer key's send to its receive(s). A flow starts where
  // the send starts and ends inside the receive's last microsecond, when the
  // tensor arrived (a flow binds to the slice enclosing its time).
  std::map<std::string, const Placed*> sends;
  for (const Placed& p : placed)
    if (!p.node->transfer_key.empty() && p.node->op == "_Send") sends[p.node->transfer_key] = &p;
  int flow = 0;
  for (const Placed& p : placed) {
    if (p.node->transfer_key.empty() || p.node->op != "_Recv") continue;
    auto s = sends.find(p.node->transfer_key);
    if (s == sends.end()) continue;
    ++flow;
    const Placed& from = *s->second;
    events.push_back(absl::StrCat(R"({"name":"transfer","cat":"DataFlow","ph":"s","id":)", flow, R"(,"pid":)", from.pid,
                                  R"(,"tid":)", from.lane, R"(,"ts":)", from.node->start_us - origin,
                                  R"(,"args":{"key":)", Quote(p.node->transfer_key), "}}"));
    events.push_back(absl::StrCat(R"({"name":"transfer","cat":"DataFlow","ph":"f","bp":"e","id":)", flow, R"(,"pid":)",
                                  p.pid, R"(,"tid":)", p.lane, R"(,"ts":)",
                                  std::max(p.node->end_us - 1, p.node->start_us) - origin, "}"));
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) absl::StrAppend(&out, events[i], i + 1 < events.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

}  // namespace distflow
