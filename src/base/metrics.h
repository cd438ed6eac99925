// Metrics: counters, gauges and histograms with labels, and the scalar series
// a training program reports (loss, accuracy), in a process-wide registry
// that renders the Prometheus text exposition format (version 0.0.4).
//
//   static Counter* steps = Metrics::Global()->GetCounter(
//       "distflow_steps_total", "Steps run by this task's master", {{"status", "ok"}});
//   steps->Increment();
//
// A metric is identified by its family name and its label set; Get* returns
// the same object for the same pair (created on first use, never freed), so
// callers may keep the pointer. A family's name, help and kind are fixed by
// its first Get*; asking for it as another kind returns a detached metric
// (counted, never exported) and logs an error, rather than crash.
// Collectors add values computed when the metrics are read (what a server
// holds now); they are removed with the handle AddCollector returned.
//
// Thread-safe: everything may be called from any thread; Increment, Set and
// Observe are lock-free or take a short per-metric lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace distflow {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Increment(double v = 1);
  double value() const;

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (the count)
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, the last is +Inf
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Latency buckets in seconds, 100 µs to 60 s.
std::vector<double> LatencyBuckets();

// One point of a scalar series.
struct ScalarPoint {
  int64_t step = 0;
  double value = 0;
};

// Receives the values a collector computes when the metrics are read.
class MetricWriter {
 public:
  virtual ~MetricWriter() = default;
  virtual void Gauge(const std::string& name, const std::string& help, const MetricLabels& labels, double v) = 0;
  virtual void Counter(const std::string& name, const std::string& help, const MetricLabels& labels, double v) = 0;
};

class Metrics {
 public:
  static Metrics* Global();

  Counter* GetCounter(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, const MetricLabels& labels = {},
                          const std::vector<double>& bounds = LatencyBuckets());

  using Collector = std::function<void(MetricWriter*)>;
  int64_t AddCollector(Collector c);
  void RemoveCollector(int64_t handle);

  // Scalar series: the last `kMaxPoints` points of each (older halves are
  // thinned to every other point, so a long run keeps its whole shape).
  static constexpr size_t kMaxPoints = 1000;
  void RecordScalar(const std::string& series, int64_t step, double value);
  std::map<std::string, std::vector<ScalarPoint>> ScalarSeries() const;

  // Everything, in the Prometheus text format; scalar series appear as the
  // gauge distflow_scalar{series="..."} with their last value.
  std::string PrometheusText() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Family {
    Kind kind;
    std::string help;
    std::map<MetricLabels, std::unique_ptr<Counter>> counters;
    std::map<MetricLabels, std::unique_ptr<Gauge>> gauges;
    std::map<MetricLabels, std::unique_ptr<Histogram>> histograms;
  };
  Family* FamilyFor(const std::string& name, const std::string& help, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Counter>> detached_counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Gauge>> detached_gauges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Histogram>> detached_histograms_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Collector> collectors_ ABSL_GUARDED_BY(mu_);
  int64_t next_collector_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::vector<ScalarPoint>> scalars_ ABSL_GUARDED_BY(mu_);
};

// A metric value as Prometheus prints it ("NaN", "+Inf", shortest round-trip).
std::string PrometheusNumber(double v);
// `s` escaped for a label value (backslash, double quote, newline).
std::string PrometheusLabelValue(const std::string& s);

}  // namespace distflow
