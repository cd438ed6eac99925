// Step traces: when and where each node of one step ran.
//
// A traced step (RunOptions::trace) records, for every node each task ran,
// its start and end time (wall clock, microseconds since the Unix epoch, so
// the tasks of one machine share a time base) and, for the _Send/_Recv
// nodes that carry a tensor between devices, the transfer's key, which is
// the same on both ends. A collective op (CollectiveReduce & co.) adds the
// phases of its run on that rank as records of op "CollectivePhase" named
// "<node>:<phase> <activity>" (e.g. "allreduce_0:reduce-scatter waiting"),
// one after another inside the op's own record (docs/COLLECTIVES.md). The
// distributed runtime gathers every task's records into one StepStats;
// ChromeTraceJson turns it into the trace-event JSON that Perfetto and
// chrome://tracing open, a collective's phases nested under its op.
//
// StepStatsCollector is thread-safe (the executor's threads record into it
// concurrently); the plain structs are values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "distflow/export.h"

namespace distflow {

struct DISTFLOW_EXPORT NodeExecStats {
  std::string node;      // node name
  std::string op;        // op type
  int64_t start_us = 0;  // wall clock, microseconds since the epoch
  int64_t end_us = 0;
  std::string transfer_key;  // _Send/_Recv only: the rendezvous key both ends share
};

struct DISTFLOW_EXPORT DeviceStepStats {
  std::string device;  // full device name, "/job:ps/replica:0/task:0/device:CPU:0"
  std::vector<NodeExecStats> nodes;
};

struct DISTFLOW_EXPORT StepStats {
  std::vector<DeviceStepStats> devices;

  int64_t num_nodes() const;
};

// Gathers the node records of one partition run.
class DISTFLOW_EXPORT StepStatsCollector {
 public:
  void Record(NodeExecStats stats);
  std::vector<NodeExecStats> Take();

 private:
  absl::Mutex mu_;
  std::vector<NodeExecStats> nodes_ ABSL_GUARDED_BY(mu_);
};

// Chrome trace-event JSON (the "JSON Object Format"): one process track per
// device, named by the device; the device's nodes as complete ("X") events
// on as few thread lanes as keep the events of one lane from overlapping;
// each _Send/_Recv pair joined by a flow event from the send to the receive.
// Times are microseconds from the step's earliest start.
DISTFLOW_EXPORT std::string ChromeTraceJson(const StepStats& stats);

}  // namespace distflow
