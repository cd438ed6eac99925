// WorkerRendezvous: one task's table of tensors sent by its partitions and
// not yet received, and of receivers waiting for tensors not yet sent.
//
// A Recv of a tensor produced on another task goes to that task's RecvTensor
// service through the RemoteRecvFn; the peer answers from its own table when
// the Send happens. A failed step is aborted: its waiters get the error and
// later Sends and Recvs of that step fail at once, so nothing is left waiting.
// Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "kernels/rendezvous.h"

namespace distflow {

class WorkerRendezvous : public Rendezvous {
 public:
  using RemoteRecvFn = std::function<void(const std::string& task, int64_t step_id, const std::string& key,
                                          CancellationManager* cm, DoneCallback done)>;

  // Fetches a bundle (Rendezvous::RecvBundleAsync) from `task` in one call,
  // carrying `pushed` (tensors this task sent `task` this step) to it.
  using RemoteBundleFn = std::function<void(
      const std::string& task, int64_t step_id, const std::vector<std::string>& keys, std::vector<PushedTensor> pushed,
      CancellationManager* cm, std::function<void(absl::Status, std::vector<Tensor>)> done)>;

  // Takes a receive of a tensor `task` pushes here (RecvPushedAsync) in
  // place of the wait in this table (WaitForPush), which it may still make:
  // the worker answers a prefetched read this way (read_prefetcher.h).
  using PushedRecvFn = std::function<void(const std::string& task, int64_t step_id, const std::string& key,
                                          CancellationManager* cm, DoneCallback done)>;

  // Without `remote_bundle`, each tensor of a bundle is received alone;
  // without `pushed`, a pushed tensor is waited for here.
  WorkerRendezvous(std::string local_task, RemoteRecvFn remote, RemoteBundleFn remote_bundle = nullptr,
                   PushedRecvFn pushed = nullptr)
      : local_task_(std::move(local_task)),
        remote_(std::move(remote)),
        remote_bundle_(std::move(remote_bundle)),
        pushed_(std::move(pushed)) {}

  absl::Status Send(int64_t step_id, const std::string& key, const Tensor& value) override;
  void RecvAsync(int64_t step_id, const std::string& key, const std::string& send_task, CancellationManager* cm,
                 DoneCallback done) override;
  // The first receive of a bundle fetches all of it from `send_task` and
  // leaves each tensor here under its key, where every receive of the
  // bundle (the first one too) takes its own. A failed fetch aborts the step.
  // The first receive ends only after the fetch's callback has run, so the
  // step (and `cm`, which the fetch uses) outlives the fetch even when the
  // step is aborted while it is in flight.
  void RecvBundleAsync(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                       const std::string& send_task, CancellationManager* cm, DoneCallback done) override;
  // The same, the fetch leaving once every tensor of `push` has been sent
  // here, and carrying them to `send_task` (they leave this table). Without
  // a RemoteBundleFn the receive fails: nothing could carry them.
  void RecvBundlePushingAsync(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                              const std::vector<std::string>& push, const std::string& send_task,
                              CancellationManager* cm, DoneCallback done) override;
  // Waits for `send_task` to push the tensor here (WaitForPush), or hands
  // the receive to the PushedRecvFn.
  void RecvPushedAsync(int64_t step_id, const std::string& key, const std::string& send_task, CancellationManager* cm,
                       DoneCallback done) override;
  // Waits for `send_task` to push the tensor here (the RecvTensor service
  // Sends it on arrival); listed by Waiting as pushed by that task.
  void WaitForPush(int64_t step_id, const std::string& key, const std::string& send_task, CancellationManager* cm,
                   DoneCallback done);
  // Waits for a tensor sent on this task (served to peers by RecvTensor).
  void RecvLocalAsync(int64_t step_id, const std::string& key, CancellationManager* cm, DoneCallback done);

  // Fails every waiter of the step with `status` and drops its tensors.
  void AbortStep(int64_t step_id, const absl::Status& status);
  // The status AbortStep gave `step_id`; OK if it was not aborted (or so
  // long ago that it was forgotten: the last 4096 aborted steps are kept).
  absl::Status StepAborted(int64_t step_id) const;
  // Fails every waiter of every step with `status`, and every later Send
  // and Recv too: the task is stopping, and no RPC may wait on it.
  void AbortAll(const absl::Status& status);
  size_t NumPendingForTest() const;
  // What receives of `step_id` wait for here: "key (not sent yet)" for a
  // send of this task not made yet (a local partition or a peer waits), "key from /job:.../task:N" for a remote one
  // still in flight (for the stalled-step log).
  std::vector<std::string> Waiting(int64_t step_id) const;

 private:
  struct Waiter {
    DoneCallback done;
    CancellationManager* cm = nullptr;
    int64_t token = -1;
    uint64_t id = 0;
  };
  struct Slot {
    std::deque<Tensor> values;
    std::deque<Waiter> waiters;
    bool fetching = false;  // its bundle's fetch is in flight: the value comes from it
    bool Empty() const { return values.empty() && waiters.empty() && !fetching; }
  };
  using Key = std::pair<int64_t, std::string>;
  using FetchDone = std::function<void(absl::Status, std::vector<Tensor>)>;

  // The bundle receives' shared path; `push` may be empty.
  void RecvBundleImpl(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                      const std::vector<std::string>& push, const std::string& send_task, CancellationManager* cm,
                      DoneCallback done);
  // Takes the tensors of `push` as they are sent here, then calls `fetch`
  // with them (or `failed` with the first error).
  void CollectPush(int64_t step_id, const std::vector<std::string>& push, CancellationManager* cm,
                   std::function<void(std::vector<PushedTensor>)> fetch, FetchDone failed);

  const std::string local_task_;
  const RemoteRecvFn remote_;
  const RemoteBundleFn remote_bundle_;
  const PushedRecvFn pushed_;
  mutable absl::Mutex mu_;
  std::map<Key, Slot> table_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Status> aborted_ ABSL_GUARDED_BY(mu_);  // bounded: oldest dropped
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Remote receives in flight: id -> (step, "key from task").
  std::map<uint64_t, std::pair<int64_t, std::string>> remote_pending_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // set by AbortAll
};

}  // namespace distflow
