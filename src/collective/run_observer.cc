#include "collective/run_observer.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/metrics.h"
#include "distflow/step_stats.h"

namespace distflow {
namespace {

const char* OpLabel(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kBroadcastSend:
    case CollectiveKind::kBroadcastRecv:
      return "broadcast";
    case CollectiveKind::kGather:
      return "gather";
  }
  return "reduce";
}

struct OpMetrics {
  Counter* ok;
  Counter* error;
  Counter* seconds;
  Counter* sent;
  Counter* received;
};

constexpr CollectiveKind kKinds[] = {CollectiveKind::kReduce, CollectiveKind::kBroadcastSend,
                                     CollectiveKind::kBroadcastRecv, CollectiveKind::kGather};
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kKinds); ++i) {
        if (static_cast<size_t>(kKinds[i]) != i) return false;
      }
      return true;
    }(),
    "kKinds lists every CollectiveKind in the enum's order: MetricsFor indexes by it");

// Every run reaches its counters here: an array indexed by the kind, built
// once (the two broadcast kinds get the same counters: GetCounter returns
// the one registered for a name and labels).
const OpMetrics& MetricsFor(CollectiveKind kind) {
  static const auto* all = [] {
    auto* m = new std::array<OpMetrics, std::size(kKinds)>();
    Metrics* g = Metrics::Global();
    const char* runs_help = "Collective runs that ended on this task, by op and status";
    for (CollectiveKind k : kKinds) {
      const char* op = OpLabel(k);
      (*m)[static_cast<size_t>(k)] = {
          g->GetCounter("distflow_collective_runs_total", runs_help, {{"op", op}, {"status", "ok"}}),
          g->GetCounter("distflow_collective_runs_total", runs_help, {{"op", op}, {"status", "error"}}),
          g->GetCounter("distflow_collective_seconds_total",
                        "Wall time of the collective runs on this task, start to end, by op", {{"op", op}}),
          g->GetCounter("distflow_collective_bytes_sent_total",
                        "Bytes this task sent its peers in collective runs, by op", {{"op", op}}),
          g->GetCounter("distflow_collective_bytes_received_total",
                        "Bytes this task received from its peers in collective runs, by op", {{"op", op}})};
    }
    return m;
  }();
  const auto i = static_cast<size_t>(kind);
  return i < all->size() ? (*all)[i] : (*all)[0];
}

int64_t NowMicros() { return Env::Default()->NowMicros(); }

// Counts what travels; forwards everything else.
class CountingChannel final : public CollectiveChannel {
 public:
  CountingChannel(std::shared_ptr<CollectiveChannel> inner, std::shared_ptr<RunObserver> observer)
      : inner_(std::move(inner)), observer_(std::move(observer)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string RankName(int r) const override { return inner_->RankName(r); }
  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    absl::Status s = inner_->Send(to, tag, value);
    if (s.ok()) observer_->CountSent(value.TotalBytes());
    return s;
  }
  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    inner_->RecvAsync(from, tag, [observer = observer_, done = std::move(done)](absl::Status s, Tensor t) {
      if (s.ok()) observer->CountReceived(t.TotalBytes());
      done(std::move(s), std::move(t));
    });
  }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

 private:
  const std::shared_ptr<CollectiveChannel> inner_;
  const std::shared_ptr<RunObserver> observer_;
};

// Times the algorithm's sends and receive callbacks.
class PhaseChannel final : public CollectiveChannel {
 public:
  PhaseChannel(std::shared_ptr<CollectiveChannel> inner, std::shared_ptr<RunObserver> observer)
      : inner_(std::move(inner)), observer_(std::move(observer)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string RankName(int r) const override { return inner_->RankName(r); }
  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    const int event = observer_->Begin(true, tag);
    absl::Status s = inner_->Send(to, tag, value);
    observer_->End(event);
    return s;
  }
  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    inner_->RecvAsync(from, tag, [observer = observer_, tag, done = std::move(done)](absl::Status s, Tensor t) {
      // The callback may end the run (and Finish it) before it returns:
      // Finish closes what is still open.
      const int event = observer->Begin(false, tag);
      done(std::move(s), std::move(t));
      observer->End(event);
    });
  }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

 private:
  const std::shared_ptr<CollectiveChannel> inner_;
  const std::shared_ptr<RunObserver> observer_;
};

// What a rank does inside a receive's callback in a phase.
const char* CallbackActivity(const std::string& phase) {
  return phase == "reduce-scatter" || phase == "exchange" || phase == "adasum" ? "reducing" : "copying";
}

}  // namespace

std::string CollectivePhaseOfTag(const std::string& tag, int n) {
  if (absl::StartsWith(tag, "ring")) {  // ring<p>_<k>: step k of ring p
    const size_t underscore = tag.find('_');
    int k = 0;
    if (underscore != std::string::npos && absl::SimpleAtoi(tag.substr(underscore + 1), &k)) {
      return k < n - 1 ? "reduce-scatter" : "all-gather";
    }
  }
  if (tag == "all") return "exchange";
  if (tag == "role") return "find-sender";
  if (tag == "data") return "broadcast";
  if (tag == "gather") return "gather";
  if (absl::StartsWith(tag, "adasum")) return "adasum";
  return tag;
}

RunObserver::RunObserver(const CollectiveParams& params, int group_size)
    : params_(params), group_size_(group_size), start_us_(NowMicros()) {}

std::shared_ptr<CollectiveChannel> RunObserver::CountBytes(std::shared_ptr<CollectiveChannel> raw) {
  return std::make_shared<CountingChannel>(std::move(raw), shared_from_this());
}

std::shared_ptr<CollectiveChannel> RunObserver::WatchPhases(std::shared_ptr<CollectiveChannel> ch) {
  if (!params_.trace) return ch;
  return std::make_shared<PhaseChannel>(std::move(ch), shared_from_this());
}

void RunObserver::CountSent(uint64_t bytes) { MetricsFor(params_.kind).sent->Increment(static_cast<double>(bytes)); }
void RunObserver::CountReceived(uint64_t bytes) {
  MetricsFor(params_.kind).received->Increment(static_cast<double>(bytes));
}

int RunObserver::Begin(bool send, const std::string& tag) {
  // A traced step's runs are few; this bounds a pathological one.
  constexpr size_t kMaxEvents = 4096;
  const int64_t now = NowMicros();
  absl::MutexLock lock(&mu_);
  if (finished_ || events_.size() >= kMaxEvents) return -1;
  events_.push_back({now, -1, send, CollectivePhaseOfTag(tag, group_size_)});
  return static_cast<int>(events_.size()) - 1;
}

void RunObserver::End(int event) {
  if (event < 0) return;
  const int64_t now = NowMicros();
  absl::MutexLock lock(&mu_);
  if (!finished_) events_[static_cast<size_t>(event)].end_us = now;
}

void RunObserver::Finish(const absl::Status& status) {
  const int64_t end_us = NowMicros();
  std::vector<PhaseEvent> events;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    for (const Event& e : events_) events.push_back({e.start_us, e.end_us < 0 ? end_us : e.end_us, e.send, e.phase});
  }
  const OpMetrics& m = MetricsFor(params_.kind);
  (status.ok() ? m.ok : m.error)->Increment();
  m.seconds->Increment(static_cast<double>(std::max<int64_t>(end_us - start_us_, 0)) / 1e6);
  if (!params_.trace) return;
  for (const PhaseSegment& seg : PhaseSegments(std::move(events), start_us_, end_us)) {
    NodeExecStats record;
    record.node = absl::StrCat(params_.node_name, ":", seg.label);
    record.op = kCollectivePhaseOp;
    record.start_us = seg.start_us;
    record.end_us = seg.end_us;
    params_.trace(record);
  }
}

std::vector<PhaseSegment> PhaseSegments(std::vector<PhaseEvent> events, int64_t start_us, int64_t end_us) {
  std::vector<PhaseSegment> out;
  if (end_us <= start_us) return out;
  for (PhaseEvent& e : events) {
    e.start_us = std::clamp(e.start_us, start_us, end_us);
    e.end_us = std::clamp(e.end_us, e.start_us, end_us);
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const PhaseEvent& a, const PhaseEvent& b) { return a.start_us < b.start_us; });
  // The elementary intervals between consecutive boundaries; each takes the
  // label of what covers it (a send before a callback, the innermost of
  // each), or, uncovered,
  // waiting for the phase of the next activity to begin (the last one's at
  // the end).
  std::vector<int64_t> bounds = {start_us, end_us};
  for (const PhaseEvent& e : events) {
    bounds.push_back(e.start_us);
    bounds.push_back(e.end_us);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  size_t next = 0;  // the first event starting at or after the current interval's end
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    const int64_t a = bounds[i], b = bounds[i + 1];
    const PhaseEvent* send = nullptr;
    const PhaseEvent* callback = nullptr;
    for (const PhaseEvent& e : events) {
      if (e.start_us > a) break;
      if (e.end_us < b) continue;
      // The innermost (latest begun) of each kind: a receive's callback may
      // run the next step's callback inside it (a receive that is there).
      (e.send ? send : callback) = &e;
    }
    std::string label;
    if (send != nullptr) {
      label = absl::StrCat(send->phase, " sending");
    } else if (callback != nullptr) {
      label = absl::StrCat(callback->phase, " ", CallbackActivity(callback->phase));
    } else {
      while (next < events.size() && events[next].start_us < b) ++next;
      const std::string phase = next < events.size() ? events[next].phase
                                : events.empty()     ? std::string("run")
                                                     : events.back().phase;
      label = absl::StrCat(phase, " waiting");
    }
    if (!out.empty() && out.back().label == label && out.back().end_us == a) {
      out.back().end_us = b;
    } else {
      out.push_back({std::move(label), a, b});
    }
  }
  return out;
}

}  // namespace distflow
