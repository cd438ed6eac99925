#include "worker/read_prefetcher.h"

#include <atomic>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "graph/attr_value.h"
#include "placement/partition.h"

namespace distflow {
namespace {

Counter* PrefetchedCounter() {
  static Counter* c = Metrics::Global()->GetCounter(
      "distflow_prefetched_reads_total",
      "Variable reads answered with the value received in the previous step (prefetched, one step stale)");
  return c;
}

// `done` called at most once: by the value, or by the run's cancellation.
struct Once {
  std::atomic<bool> fired{false};
  Rendezvous::DoneCallback done;
  std::shared_ptr<CancellationManager> cm;
  std::atomic<CancellationManager::Token> token{CancellationManager::kInvalidToken};
  void Fire(absl::Status s, Tensor t) {
    if (fired.exchange(true)) return;
    const CancellationManager::Token registered = token.load();
    if (cm != nullptr && registered != CancellationManager::kInvalidToken) cm->Deregister(registered);
    Rendezvous::DoneCallback d = std::move(done);
    d(std::move(s), std::move(t));
  }
};

}  // namespace

struct ReadPrefetcher::Fetch {
  explicit Fetch(int64_t r) : run(r) {}
  const int64_t run;
  // Set once, under the prefetcher's mu_; read-only afterwards.
  bool finished = false;
  absl::Status status;
  Tensor value;
  std::vector<std::function<void()>> waiters;
};

std::shared_ptr<ReadPrefetcher> ReadPrefetcher::ForGraph(const proto::GraphDef& graph) {
  absl::flat_hash_set<std::string> keys;
  for (const proto::NodeDef& n : graph.node()) {
    if (n.op() != "_Recv") continue;
    absl::StatusOr<bool> on = GetAttrBool(n, kPrefetchRecvAttr);
    absl::StatusOr<std::string> key = GetAttrString(n, "key");
    if (on.ok() && *on && key.ok()) keys.insert(*key);
  }
  if (keys.empty()) return nullptr;
  return std::shared_ptr<ReadPrefetcher>(new ReadPrefetcher(std::move(keys)));
}

double ReadPrefetcher::PrefetchedTotal() { return PrefetchedCounter()->value(); }

void ReadPrefetcher::WhenDone(const std::shared_ptr<Fetch>& f, std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!f->finished) {
      f->waiters.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void ReadPrefetcher::Finish(const std::shared_ptr<Fetch>& f, absl::Status s, Tensor t) {
  std::vector<std::function<void()>> waiters;
  {
    absl::MutexLock lock(&mu_);
    f->status = std::move(s);
    f->value = std::move(t);
    f->finished = true;
    waiters.swap(f->waiters);
  }
  for (auto& w : waiters) w();
}

void ReadPrefetcher::Recv(int64_t run, const std::string& key, FetchFn fetch, std::shared_ptr<CancellationManager> cm,
                          Rendezvous::DoneCallback done) {
  auto mine = std::make_shared<Fetch>(run);
  std::shared_ptr<Fetch> previous;
  {
    absl::MutexLock lock(&mu_);
    std::deque<std::shared_ptr<Fetch>>& q = fetches_[key];
    for (const auto& f : q)
      if (f->run == run - 1) previous = f;
    q.push_back(mine);
    // Only the previous run's receive is ever used: keep the last two.
    while (q.size() > 2) q.pop_front();
  }
  auto once = std::make_shared<Once>();
  once->done = std::move(done);
  if (cm != nullptr) {
    once->cm = cm;
    once->token =
        cm->Register([once, key] { once->Fire(absl::CancelledError("Recv of '" + key + "' cancelled"), {}); });
    if (once->token.load() == CancellationManager::kInvalidToken) {
      once->cm = nullptr;
      once->Fire(absl::CancelledError("Recv of '" + key + "' cancelled"), {});
      // The run's own receive still goes out: the next run may use it.
    }
  }
  std::shared_ptr<ReadPrefetcher> self = shared_from_this();
  fetch([self, mine](absl::Status s, Tensor t) { self->Finish(mine, std::move(s), std::move(t)); });
  auto own = [mine, once] { once->Fire(mine->status, mine->value); };
  if (previous == nullptr) {
    WhenDone(mine, std::move(own));
    return;
  }
  WhenDone(previous, [self, previous, mine, once, own = std::move(own)]() mutable {
    if (previous->status.ok()) {
      if (!once->fired.load()) PrefetchedCounter()->Increment();
      once->Fire(absl::OkStatus(), previous->value);
      return;
    }
    self->WhenDone(mine, std::move(own));  // the previous receive failed: this run's own value
  });
}

}  // namespace distflow
