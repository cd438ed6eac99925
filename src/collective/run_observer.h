// What one collective run shows outside its rank: its bytes and time in the
// process's /metrics (base/metrics.h), and, when its step is traced, its
// phases in the step's trace, nested under the op's own record.
//
// Metrics, by `op` (reduce, broadcast or gather):
//   distflow_collective_runs_total{op, status}    runs ended here (status ok or error)
//   distflow_collective_seconds_total{op}         their wall time on this rank, start to end
//   distflow_collective_bytes_sent_total{op}      bytes this task sent its peers in them
//   distflow_collective_bytes_received_total{op}  bytes it received from them
// Bytes are counted as they travel (below fp16 compression, which halves
// them, and with the few dozen bytes of shape_check.h's signature).
//
// Phases. The observer sees the run's channel twice: below every other
// wrapper, where it counts the bytes, and just above the algorithm, where it
// sees the algorithm's own tags and times each Send and each receive's
// callback (the merging or copying the algorithm does there, and the sends
// it makes next). When the run ends, its time on this rank is cut into
// consecutive segments, each labelled with the algorithm's phase (ring
// `reduce-scatter` and `all-gather`, the direct exchange's `exchange`,
// broadcast's `find-sender` and `broadcast`, `gather`, `adasum`) and what
// this rank did: `sending` (inside a Send), `reducing` or `copying` (inside
// a receive's callback) or `waiting` (neither: waiting for peers). With
// pipelined rings several parts may be in flight at once; a moment when the
// rank sends for one part and reduces another counts as sending. Each
// segment becomes a record {node: "<op's node>:<phase> <activity>", op:
// "CollectivePhase"} in the step's trace (distflow/step_stats.h), which
// ChromeTraceJson draws inside the op's own slice.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "collective/transport.h"

namespace distflow {

// The op of a trace record that is a collective's phase.
inline constexpr char kCollectivePhaseOp[] = "CollectivePhase";

// The phase an algorithm's message tag belongs to, in a group of `n`.
std::string CollectivePhaseOfTag(const std::string& tag, int n);

class RunObserver : public std::enable_shared_from_this<RunObserver> {
 public:
  // Starts the run's clock. `params.trace` (may be empty) receives the phases.
  RunObserver(const CollectiveParams& params, int group_size);

  // The channel as the transport gives it: counts the bytes that travel.
  std::shared_ptr<CollectiveChannel> CountBytes(std::shared_ptr<CollectiveChannel> raw);
  // The channel the algorithm uses: times its sends and receives when the
  // step is traced (else `ch` itself).
  std::shared_ptr<CollectiveChannel> WatchPhases(std::shared_ptr<CollectiveChannel> ch);
  // The run ended with `status`: counts it and records its phases. Once;
  // what the channels report afterwards is ignored.
  void Finish(const absl::Status& status);

  // Used by the channel wrappers: an activity under a tag begins; End with
  // what Begin returned (-1: not recorded).
  int Begin(bool send, const std::string& tag);
  void End(int event);
  void CountSent(uint64_t bytes);
  void CountReceived(uint64_t bytes);

 private:
  struct Event {
    int64_t start_us = 0;
    int64_t end_us = -1;  // -1: still going
    bool send = false;
    std::string phase;
  };
  const CollectiveParams params_;
  const int group_size_;
  const int64_t start_us_;
  absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// The consecutive {label, start, end} segments of a run from `start_us` to
// `end_us` given its sends and callbacks (exposed for the tests).
struct PhaseSegment {
  std::string label;
  int64_t start_us = 0;
  int64_t end_us = 0;
};
struct PhaseEvent {
  int64_t start_us = 0;
  int64_t end_us = 0;
  bool send = false;
  std::string phase;
};
std::vector<PhaseSegment> PhaseSegments(std::vector<PhaseEvent> events, int64_t start_us, int64_t end_us);

}  // namespace distflow
