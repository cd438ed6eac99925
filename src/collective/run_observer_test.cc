// RunObserver: a run's phases for the step's trace and its bytes and time in
// the metrics, with N ranks in this process.
#include "collective/run_observer.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics.h"
#include "collective/collective_test_util.h"
#include "distflow/step_stats.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(PhaseSegments, CutsTheRunIntoWaitingSendingAndReducing) {
  // 0..100: a send at 10..20, a callback at 40..70 with a send inside it
  // at 50..55 (the next phase's), then nothing until 100; and a callback
  // of the all-gather run inside a reduce-scatter one (a receive that was
  // there already) at 80..90 inside 75..95.
  std::vector<PhaseEvent> events = {{40, 70, false, "reduce-scatter"},
                                    {10, 20, true, "reduce-scatter"},
                                    {50, 55, true, "all-gather"},
                                    {75, 95, false, "reduce-scatter"},
                                    {80, 90, false, "all-gather"}};
  std::vector<PhaseSegment> got = PhaseSegments(events, 0, 100);
  std::vector<std::tuple<std::string, int64_t, int64_t>> want = {
      {"reduce-scatter waiting", 0, 10},   {"reduce-scatter sending", 10, 20},  {"reduce-scatter waiting", 20, 40},
      {"reduce-scatter reducing", 40, 50}, {"all-gather sending", 50, 55},      {"reduce-scatter reducing", 55, 70},
      {"reduce-scatter waiting", 70, 75},  {"reduce-scatter reducing", 75, 80}, {"all-gather copying", 80, 90},
      {"reduce-scatter reducing", 90, 95}, {"all-gather waiting", 95, 100},  // after the last activity begun: its phase
  };
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].label, std::get<0>(want[i])) << i;
    EXPECT_EQ(got[i].start_us, std::get<1>(want[i])) << i;
    EXPECT_EQ(got[i].end_us, std::get<2>(want[i])) << i;
  }
}

TEST(PhaseSegments, ClipsToTheRunAndCoalescesAndCopiesOutsideReductions) {
  // Two overlapping callbacks of the all-gather (copying), one reaching past
  // the run's end; events before the run are clipped to its start.
  std::vector<PhaseSegment> got = PhaseSegments(
      {{-5, 10, false, "all-gather"}, {5, 30, false, "all-gather"}, {20, 200, false, "all-gather"}}, 0, 50);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].label, "all-gather copying");
  EXPECT_EQ(got[0].start_us, 0);
  EXPECT_EQ(got[0].end_us, 50);
  EXPECT_TRUE(PhaseSegments({}, 10, 10).empty()) << "a run of no time has no segments";
  got = PhaseSegments({}, 0, 7);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].label, "run waiting");
}

TEST(CollectivePhaseOfTag, NamesTheAlgorithmsPhases) {
  EXPECT_EQ(CollectivePhaseOfTag("ring0_0", 3), "reduce-scatter");
  EXPECT_EQ(CollectivePhaseOfTag("ring5_1", 3), "reduce-scatter");
  EXPECT_EQ(CollectivePhaseOfTag("ring5_2", 3), "all-gather");
  EXPECT_EQ(CollectivePhaseOfTag("all", 3), "exchange");
  EXPECT_EQ(CollectivePhaseOfTag("role", 3), "find-sender");
  EXPECT_EQ(CollectivePhaseOfTag("data", 3), "broadcast");
  EXPECT_EQ(CollectivePhaseOfTag("gather", 3), "gather");
  EXPECT_EQ(CollectivePhaseOfTag("adasum_rs_1", 4), "adasum");
}

double CounterValue(const std::string& name, const MetricLabels& labels) {
  return Metrics::Global()->GetCounter(name, "", labels)->value();
}

// Three ranks reduce a ring-sized tensor and a small one (the direct
// exchange), traced: each rank's records cover its run end to end with
// consecutive segments of the algorithm's phases, and the metrics count
// every byte each rank sent and received.
TEST(RunObserver, TracedRunsRecordTheirPhasesAndMetricsCountTheirBytes) {
  constexpr int kRanks = 3;
  for (int64_t count : {int64_t{40009}, int64_t{5}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    const bool ring = count == 40009;
    Ranks ranks(kRanks);
    std::vector<Tensor> inputs;
    for (int r = 0; r < kRanks; ++r) {
      Tensor t(DT_FLOAT, TensorShape({count}));
      for (int64_t i = 0; i < count; ++i) t.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(i % 7 + r);
      inputs.push_back(t);
    }
    absl::Mutex mu;
    std::vector<std::vector<NodeExecStats>> records(kRanks);
    std::vector<CollectiveParams> params(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      CollectiveParams& p = params[static_cast<size_t>(r)];
      p.node_name = "allreduce_0";
      p.group_size = kRanks;
      p.group_key = 1;
      p.instance_key = 1;
      p.trace = [&mu, &records, r](const NodeExecStats& n) {
        absl::MutexLock lock(&mu);
        records[static_cast<size_t>(r)].push_back(n);
      };
    }
    const MetricLabels reduce = {{"op", "reduce"}};
    const double sent0 = CounterValue("distflow_collective_bytes_sent_total", reduce);
    const double received0 = CounterValue("distflow_collective_bytes_received_total", reduce);
    const double ok0 = CounterValue("distflow_collective_runs_total", {{"op", "reduce"}, {"status", "ok"}});
    const double seconds0 = CounterValue("distflow_collective_seconds_total", reduce);
    const int64_t before_us = absl::ToUnixMicros(absl::Now());
    auto out = ranks.RunEach(params, inputs);
    const int64_t after_us = absl::ToUnixMicros(absl::Now());
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      EXPECT_EQ(out[static_cast<size_t>(r)]->flat<float>()[1], 3.f + 3) << "rank " << r;
      absl::MutexLock lock(&mu);
      const std::vector<NodeExecStats>& segs = records[static_cast<size_t>(r)];
      ASSERT_FALSE(segs.empty()) << "rank " << r << " recorded no phase";
      std::set<std::string> phases;
      for (size_t i = 0; i < segs.size(); ++i) {
        const NodeExecStats& s = segs[i];
        EXPECT_EQ(s.op, kCollectivePhaseOp);
        ASSERT_TRUE(absl::StartsWith(s.node, "allreduce_0:")) << s.node;
        EXPECT_LT(s.start_us, s.end_us) << s.node;
        EXPECT_GE(s.start_us, before_us);
        EXPECT_LE(s.end_us, after_us);
        if (i > 0) {
          EXPECT_EQ(s.start_us, segs[i - 1].end_us) << "segments follow each other: " << s.node;
        }
        const std::string label = s.node.substr(s.node.find(':') + 1);
        phases.insert(label.substr(0, label.find(' ')));
        const std::string activity = label.substr(label.find(' ') + 1);
        EXPECT_TRUE(activity == "waiting" || activity == "sending" || activity == "reducing" || activity == "copying")
            << label;
      }
      const std::set<std::string> want =
          ring ? std::set<std::string>{"reduce-scatter", "all-gather"} : std::set<std::string>{"exchange"};
      EXPECT_EQ(phases, want) << "rank " << r;
      const std::string first = segs.front().node, last = segs.back().node;
      if (ring) {
        EXPECT_TRUE(absl::StrContains(first, "reduce-scatter")) << first;
        EXPECT_TRUE(absl::StrContains(last, "all-gather")) << last;
      }
    }
    // Every rank sends each ring step one segment (together the whole
    // tensor), 2(n-1) steps; the direct exchange sends the tensor to each
    // peer. Shape checks' signatures add a few bytes to first messages.
    const double payload = ring ? 2.0 * (kRanks - 1) * static_cast<double>(count) * 4
                                : kRanks * (kRanks - 1) * static_cast<double>(count) * 4;
    const double sent = CounterValue("distflow_collective_bytes_sent_total", reduce) - sent0;
    const double received = CounterValue("distflow_collective_bytes_received_total", reduce) - received0;
    EXPECT_EQ(sent, received) << "every byte sent was received by a rank of this process";
    EXPECT_GE(sent, payload);
    EXPECT_LT(sent, payload + kRanks * (kRanks - 1) * 256) << "more than the signatures on top of the payload";
    EXPECT_EQ(CounterValue("distflow_collective_runs_total", {{"op", "reduce"}, {"status", "ok"}}) - ok0, kRanks);
    EXPECT_GT(CounterValue("distflow_collective_seconds_total", reduce) - seconds0, 0);
  }
}

// An untraced run records nothing but is counted; a failed one counts as
// an error, and a broadcast under its own op.
TEST(RunObserver, UntracedAndFailedRunsAreCountedByOp) {
  Ranks ranks(2);
  CollectiveParams p;
  p.kind = CollectiveKind::kBroadcastSend;
  p.node_name = "bcast";
  p.group_size = 2;
  p.group_key = 1;
  p.instance_key = 2;
  p.shape = TensorShape({3});
  const MetricLabels bcast = {{"op", "broadcast"}};
  const double sent0 = CounterValue("distflow_collective_bytes_sent_total", bcast);
  const double ok0 = CounterValue("distflow_collective_runs_total", {{"op", "broadcast"}, {"status", "ok"}});
  const double error0 = CounterValue("distflow_collective_runs_total", {{"op", "broadcast"}, {"status", "error"}});
  CollectiveParams recv = p;
  recv.kind = CollectiveKind::kBroadcastRecv;
  auto out = ranks.RunEach({p, recv}, {Tensor::FromVector<float>({1, 2, 3}), Tensor()});
  ASSERT_TRUE(out[0].ok()) << out[0].status();
  ASSERT_TRUE(out[1].ok()) << out[1].status();
  EXPECT_EQ(out[1]->flat<float>()[2], 3.f);
  EXPECT_EQ(CounterValue("distflow_collective_runs_total", {{"op", "broadcast"}, {"status", "ok"}}) - ok0, 2);
  EXPECT_GE(CounterValue("distflow_collective_bytes_sent_total", bcast) - sent0, 12) << "at least the 3 floats";
  // Both ranks send: every rank fails.
  out = ranks.RunEach({p, p}, {Tensor::FromVector<float>({1, 2, 3}), Tensor::FromVector<float>({4, 5, 6})});
  EXPECT_FALSE(out[0].ok());
  EXPECT_FALSE(out[1].ok());
  EXPECT_EQ(CounterValue("distflow_collective_runs_total", {{"op", "broadcast"}, {"status", "error"}}) - error0, 2);
}

}  // namespace
}  // namespace distflow
