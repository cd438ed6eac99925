// MasterSession: one client session on a master — its graph, the devices it
// may use (discovered with backoff), a plan per (feeds, fetches, targets)
// signature (placement, partitions registered with their workers), and the
// asynchronous step: RunGraph on every partition's WorkerInterface (which
// WorkerCacheInterface gives, in memory for this task's own worker), aborted everywhere
// on the first error, answered from the last partition's completion; retried
// requests (same request id) run once. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/thread_pool.h"
#include "proto/master.pb.h"

namespace distflow {

class BulkServer;
class Worker;
class WorkerCacheInterface;

class MasterSession {
 public:
  // `local_worker` (may be null) is registered with `workers` as
  // `local_task`'s in-process worker (WorkerCache::SetLocalWorker); `bulk` (may be null) takes large feeds and serves
  // large fetches; `closing` (may be null), once notified, ends Init's wait for the cluster.
  static std::shared_ptr<MasterSession> Create(std::string handle, proto::SessionConfig config,
                                               WorkerCacheInterface* workers, std::string local_task,
                                               Worker* local_worker, BulkServer* bulk,
                                               const absl::Notification* closing = nullptr);
  virtual ~MasterSession() = default;

  // Waits for the cluster's tasks (per the config's filters), then takes the graph.
  virtual absl::Status Init(const proto::GraphDef& graph) = 0;
  // Adds nodes; a bad extension leaves the graph unchanged.
  virtual absl::Status Extend(const proto::GraphDef& graph) = 0;
  // Runs one step without parking the calling thread: `done` is called once,
  // from whichever thread finishes it. `req` and `resp` must outlive that.
  // Steps whose plan is not built yet run on `pool` (registering partitions
  // makes blocking RPCs).
  virtual void RunAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp, ThreadPool* pool,
                        std::function<void(absl::Status)> done) = 0;
  // Deregisters the partitions from their workers.
  virtual void Close() = 0;
  // Fails the running steps that have a partition on `task` with `why` (the
  // task died) and aborts their other partitions.
  virtual void AbortStepsOnTask(const std::string& task, const absl::Status& why) = 0;
  // Logs each step that has run for longer than `every` (at most once per
  // `every`) with the tasks whose partitions have not returned; returns how
  // many reports it logged.
  virtual int LogStalledSteps(absl::Duration every) = 0;
};

// A random positive step (or session) id.
int64_t RandomStepId();

}  // namespace distflow
