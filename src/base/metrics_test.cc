#include "base/metrics.h"

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(Metrics, CountersGaugesAndHistogramsPrintInTheTextFormat) {
  Metrics m;
  Counter* ok = m.GetCounter("test_requests_total", "Requests.\nSecond line", {{"method", "RunStep"}});
  EXPECT_EQ(ok, m.GetCounter("test_requests_total", "ignored", {{"method", "RunStep"}})) << "same name and labels";
  ok->Increment();
  ok->Increment(2);
  ok->Increment(-5);  // counters never go down
  m.GetCounter("test_requests_total", "", {{"method", "a\"b\\c\nd"}})->Increment();
  m.GetGauge("test_sessions", "Sessions.")->Set(3);
  Histogram* h = m.GetHistogram("test_latency_seconds", "Latency.", {}, {0.1, 1});
  h->Observe(0.05);
  h->Observe(0.1);  // on a bound: counted in that bucket (le is inclusive)
  h->Observe(5);
  const std::string text = m.PrometheusText();
  EXPECT_TRUE(absl::StrContains(text, "# HELP test_requests_total Requests.\\nSecond line\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE test_requests_total counter\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_requests_total{method=\"RunStep\"} 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_requests_total{method=\"a\\\"b\\\\c\\nd\"} 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE test_sessions gauge\ntest_sessions 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_latency_seconds_bucket{le=\"0.1\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_latency_seconds_bucket{le=\"1\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_latency_seconds_bucket{le=\"+Inf\"} 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_latency_seconds_sum 5.15\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "test_latency_seconds_count 3\n")) << text;
}

TEST(Metrics, AFamilyAskedForAsAnotherKindIsNotCorrupted) {
  Metrics m;
  m.GetCounter("test_x", "X.")->Increment(4);
  Gauge* g = m.GetGauge("test_x", "X as a gauge");
  ASSERT_NE(g, nullptr);
  g->Set(100);
  const std::string text = m.PrometheusText();
  EXPECT_TRUE(absl::StrContains(text, "# TYPE test_x counter\ntest_x 4\n")) << text;
  EXPECT_FALSE(absl::StrContains(text, "100")) << text;
}

TEST(Metrics, CollectorsAddValuesWhenReadAndCanBeRemoved) {
  Metrics m;
  int reads = 0;
  int64_t h = m.AddCollector([&reads](MetricWriter* w) {
    ++reads;
    w->Gauge("test_variables", "Variables held.", {{"task", "/job:ps/task:0"}}, 7);
    w->Gauge("test_variables", "Variables held.", {{"task", "/job:ps/task:1"}}, 2);
  });
  std::string text = m.PrometheusText();
  EXPECT_EQ(reads, 1);
  EXPECT_TRUE(absl::StrContains(text,
                                "# TYPE test_variables gauge\ntest_variables{task=\"/job:ps/task:0\"} 7\n"
                                "test_variables{task=\"/job:ps/task:1\"} 2\n"))
      << "one HELP/TYPE per family: " << text;
  m.RemoveCollector(h);
  text = m.PrometheusText();
  EXPECT_EQ(reads, 1);
  EXPECT_FALSE(absl::StrContains(text, "test_variables")) << text;
}

TEST(Metrics, ScalarSeriesKeepTheirShapeWithinABound) {
  Metrics m;
  const int n = 5000;
  for (int i = 0; i < n; ++i) m.RecordScalar("loss", i, 1.0 / (i + 1));
  auto series = m.ScalarSeries();
  const auto& pts = series.at("loss");
  EXPECT_LE(pts.size(), Metrics::kMaxPoints);
  EXPECT_GE(pts.size(), Metrics::kMaxPoints / 2);
  EXPECT_EQ(pts.front().step, 0) << "the start is kept";
  EXPECT_EQ(pts.back().step, n - 1) << "the newest is kept";
  for (size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i - 1].step, pts[i].step);
  EXPECT_TRUE(absl::StrContains(m.PrometheusText(), "distflow_scalar{series=\"loss\"} 0.0002\n"));
}

TEST(Metrics, ConcurrentIncrementsAreNotLost) {
  Metrics m;
  Counter* c = m.GetCounter("test_concurrent_total", "C.");
  Histogram* h = m.GetHistogram("test_concurrent_seconds", "H.");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([c, h] {
      for (int i = 0; i < 10000; ++i) {
        c->Increment();
        h->Observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
  EXPECT_EQ(h->snapshot().cumulative.back(), 40000u);
}

TEST(Metrics, NumbersPrintAsPrometheusReadsThem) {
  EXPECT_EQ(PrometheusNumber(3), "3");
  EXPECT_EQ(PrometheusNumber(0.0001), "0.0001");
  EXPECT_EQ(PrometheusNumber(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(PrometheusNumber(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusNumber(std::nan("")), "NaN");
}

}  // namespace
}  // namespace distflow
