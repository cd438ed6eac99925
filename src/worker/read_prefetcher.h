// ReadPrefetcher: one registered partition's prefetched variable reads
// (docs/PERFORMANCE.md, "Prefetching the next step's variables").
//
// The master marks a _Recv with kPrefetchRecvAttr (placement/partition.h)
// when the step asked for it and the _Recv brings, from another task, the
// value of a variable the same step updates: a model's weights read by a
// worker from its ps in asynchronous training. Each run of the partition
// still issues its own receive of that value (a RecvTensor call, or, for a
// read that rides with the ps's fetch of the gradients, the wait for that
// push: no call of its own), but answers the _Recv with the value the
// previous run's receive brought (waiting for it if it is still in flight),
// so the transfer of this step's values overlaps this step's compute and
// the next step starts without waiting for the ps.
//
// Staleness is bounded by one step: runs are numbered by the worker (every
// partition run on the task counts), and a run uses only the value received
// by the run numbered just before it, for the same partition and key.
// Anything else (the first run, another partition ran in between, the
// previous receive failed) waits for the run's own receive, as without
// prefetching. Thread-safe.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "base/cancellation.h"
#include "kernels/rendezvous.h"
#include "proto/graph.pb.h"

namespace distflow {

class ReadPrefetcher : public std::enable_shared_from_this<ReadPrefetcher> {
 public:
  // The partition's marked receives; null if it has none.
  static std::shared_ptr<ReadPrefetcher> ForGraph(const proto::GraphDef& graph);

  // True if `key` is one of the partition's marked receives.
  bool Covers(const std::string& key) const { return keys_.contains(key); }

  // The receive of `key` in the partition's run numbered `run` (by the
  // worker, increasing): `fetch` starts the run's own receive (it must call
  // its callback exactly once); `done` gets the value of run `run - 1`'s
  // receive of `key` if there was one and it succeeds, else this run's.
  // `cm` (may be null) is the run's: cancelling it fails `done` at once.
  using FetchFn = std::function<void(Rendezvous::DoneCallback)>;
  void Recv(int64_t run, const std::string& key, FetchFn fetch, std::shared_ptr<CancellationManager> cm,
            Rendezvous::DoneCallback done);

  // Receives answered with the previous run's value, over the process (the
  // counter distflow_prefetched_reads_total).
  static double PrefetchedTotal();

 private:
  explicit ReadPrefetcher(absl::flat_hash_set<std::string> keys) : keys_(std::move(keys)) {}
  struct Fetch;
  void WhenDone(const std::shared_ptr<Fetch>& f, std::function<void()> fn);
  void Finish(const std::shared_ptr<Fetch>& f, absl::Status s, Tensor t);

  const absl::flat_hash_set<std::string> keys_;
  absl::Mutex mu_;
  // Per key, the receives of the last runs (oldest first).
  std::map<std::string, std::deque<std::shared_ptr<Fetch>>> fetches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
