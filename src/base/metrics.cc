#include "base/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/logging.h"

namespace distflow {

void Counter::Increment(double v) {
  if (!(v >= 0)) return;  // counters only go up; NaN and negatives are ignored
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}
double Counter::value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Add(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  absl::MutexLock lock(&mu_);
  ++counts_[i];
  if (std::isfinite(v)) sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(total += c);
  s.sum = sum_;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

Metrics* Metrics::Global() {
  static Metrics* m = new Metrics();  // never destroyed: threads may report during exit
  return m;
}

Metrics::Family* Metrics::FamilyFor(const std::string& name, const std::string& help, Kind kind) {
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    it->second.kind = kind;
    it->second.help = help;
  } else if (it->second.kind != kind) {
    LOG(ERROR) << "Metric '" << name << "' is asked for as another kind than it was registered with; "
               << "this use is not exported";
    return nullptr;
  }
  return &it->second;
}

Counter* Metrics::GetCounter(const std::string& name, const std::string& help, const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family* f = FamilyFor(name, help, Kind::kCounter);
  if (f == nullptr) return detached_counters_.emplace_back(std::make_unique<Counter>()).get();
  auto& slot = f->counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* Metrics::GetGauge(const std::string& name, const std::string& help, const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family* f = FamilyFor(name, help, Kind::kGauge);
  if (f == nullptr) return detached_gauges_.emplace_back(std::make_unique<Gauge>()).get();
  auto& slot = f->gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* Metrics::GetHistogram(const std::string& name, const std::string& help, const MetricLabels& labels,
                                 const std::vector<double>& bounds) {
  absl::MutexLock lock(&mu_);
  Family* f = FamilyFor(name, help, Kind::kHistogram);
  if (f == nullptr) return detached_histograms_.emplace_back(std::make_unique<Histogram>(bounds)).get();
  auto& slot = f->histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return slot.get();
}

int64_t Metrics::AddCollector(Collector c) {
  absl::MutexLock lock(&mu_);
  int64_t h = next_collector_++;
  collectors_.emplace(h, std::move(c));
  return h;
}

void Metrics::RemoveCollector(int64_t handle) {
  absl::MutexLock lock(&mu_);
  collectors_.erase(handle);
}

void Metrics::RecordScalar(const std::string& series, int64_t step, double value) {
  absl::MutexLock lock(&mu_);
  std::vector<ScalarPoint>& pts = scalars_[series];
  pts.push_back({step, value});
  if (pts.size() > kMaxPoints) {
    // Thin the older half to every other point.
    std::vector<ScalarPoint> kept;
    kept.reserve(kMaxPoints);
    const size_t half = pts.size() / 2;
    for (size_t i = 0; i < half; i += 2) kept.push_back(pts[i]);
    kept.insert(kept.end(), pts.begin() + static_cast<std::ptrdiff_t>(half), pts.end());
    pts = std::move(kept);
  }
}

std::map<std::string, std::vector<ScalarPoint>> Metrics::ScalarSeries() const {
  absl::MutexLock lock(&mu_);
  return scalars_;
}

std::string PrometheusNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  for (int precision = 6; precision < 17; ++precision) {  // the shortest that reads back the same
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

namespace {

// The format escapes backslash and newline in help text, and double quotes
// too in label values.
std::string Escape(const std::string& s, bool quotes) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string HelpText(const std::string& s) { return Escape(s, false); }

}  // namespace

std::string PrometheusLabelValue(const std::string& s) { return Escape(s, true); }

namespace {

std::string LabelSet(const MetricLabels& labels, const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    absl::StrAppend(&out, first ? "" : ",", k, "=\"", PrometheusLabelValue(v), "\"");
    first = false;
  }
  if (extra != nullptr) absl::StrAppend(&out, first ? "" : ",", extra->first, "=\"", extra->second, "\"");
  return out + "}";
}

// Collected values, grouped by family so that each family is printed once.
class TextWriter : public MetricWriter {
 public:
  struct Fam {
    std::string kind, help;
    std::vector<std::pair<MetricLabels, double>> samples;
  };
  void Gauge(const std::string& name, const std::string& help, const MetricLabels& labels, double v) override {
    Add(name, "gauge", help, labels, v);
  }
  void Counter(const std::string& name, const std::string& help, const MetricLabels& labels, double v) override {
    Add(name, "counter", help, labels, v);
  }
  std::map<std::string, Fam> families;

 private:
  void Add(const std::string& name, const std::string& kind, const std::string& help, const MetricLabels& labels,
           double v) {
    Fam& f = families[name];
    if (f.kind.empty()) {
      f.kind = kind;
      f.help = help;
    }
    f.samples.emplace_back(labels, v);
  }
};

}  // namespace

std::string Metrics::PrometheusText() const {
  std::map<int64_t, Collector> collectors;
  std::string out;
  TextWriter collected;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
    for (const auto& [series, pts] : scalars_) {
      if (!pts.empty())
        collected.Gauge("distflow_scalar", "The last value of a series the program reported (loss, accuracy)",
                        {{"series", series}}, pts.back().value);
    }
  }
  // Collectors run without our lock: they may take their owners' locks.
  for (const auto& [h, c] : collectors) c(&collected);
  absl::MutexLock lock(&mu_);
  for (const auto& [name, f] : families_) {
    if (collected.families.count(name)) continue;  // a collector's family of the same name wins
    const char* kind = f.kind == Kind::kCounter ? "counter" : f.kind == Kind::kGauge ? "gauge" : "histogram";
    absl::StrAppend(&out, "# HELP ", name, " ", HelpText(f.help), "\n# TYPE ", name, " ", kind, "\n");
    for (const auto& [labels, c] : f.counters)
      absl::StrAppend(&out, name, LabelSet(labels), " ", PrometheusNumber(c->value()), "\n");
    for (const auto& [labels, g] : f.gauges)
      absl::StrAppend(&out, name, LabelSet(labels), " ", PrometheusNumber(g->value()), "\n");
    for (const auto& [labels, h] : f.histograms) {
      Histogram::Snapshot s = h->snapshot();
      for (size_t i = 0; i <= s.bounds.size(); ++i) {
        std::pair<std::string, std::string> le{"le", i < s.bounds.size() ? PrometheusNumber(s.bounds[i]) : "+Inf"};
        absl::StrAppend(&out, name, "_bucket", LabelSet(labels, &le), " ", s.cumulative[i], "\n");
      }
      absl::StrAppend(&out, name, "_sum", LabelSet(labels), " ", PrometheusNumber(s.sum), "\n");
      absl::StrAppend(&out, name, "_count", LabelSet(labels), " ", s.cumulative.back(), "\n");
    }
  }
  for (const auto& [name, f] : collected.families) {
    absl::StrAppend(&out, "# HELP ", name, " ", HelpText(f.help), "\n# TYPE ", name, " ", f.kind, "\n");
    for (const auto& [labels, v] : f.samples)
      absl::StrAppend(&out, name, LabelSet(labels), " ", PrometheusNumber(v), "\n");
  }
  return out;
}

}  // namespace distflow
