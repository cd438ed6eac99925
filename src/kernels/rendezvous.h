// Rendezvous: where a _Send kernel leaves a tensor and a _Recv kernel picks it
// up, keyed by (step id, edge key). The distributed runtime implements it: a
// Recv whose sender is on another task fetches the tensor from that task.
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/cancellation.h"
#include "distflow/tensor.h"

namespace distflow {

class Rendezvous {
 public:
  using DoneCallback = std::function<void(absl::Status, Tensor)>;
  virtual ~Rendezvous() = default;

  virtual absl::Status Send(int64_t step_id, const std::string& key, const Tensor& value) = 0;
  // Calls `done` once, on any thread, with the tensor or an error. `send_task`
  // names the producing task ("/job:ps/replica:0/task:0"). Cancellation of
  // `cm` ends the wait with Cancelled.
  virtual void RecvAsync(int64_t step_id, const std::string& key, const std::string& send_task, CancellationManager* cm,
                         DoneCallback done) = 0;
  // The same for a tensor that travels in a bundle (`bundle`: the keys of
  // every tensor of the step sent from `send_task` to this partition with
  // it, `key` among them): a rendezvous that can fetches the whole bundle
  // from the peer in one call when the first of its receives asks and
  // leaves the other tensors for their receives. By default, a receive of
  // its own.
  virtual void RecvBundleAsync(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                               const std::string& send_task, CancellationManager* cm, DoneCallback done) {
    RecvAsync(step_id, key, send_task, cm, std::move(done));
  }
  // A bundle whose fetch carries tensors to its sender (a push,
  // placement/transfer_bundles.h): `push` names tensors this task sends
  // `send_task` in the same step, and the fetch leaves only once every one of
  // them has been sent here, carrying them; `send_task` then makes no call for
  // them (its receives are RecvPushedAsync). A rendezvous that cannot push
  // fails the receive.
  virtual void RecvBundlePushingAsync(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                                      const std::vector<std::string>& push, const std::string& send_task,
                                      CancellationManager* cm, DoneCallback done) {
    done(absl::FailedPreconditionError("Receive of '" + key + "' pushes tensors to " + send_task +
                                       ", which only a distributed step's rendezvous can"),
         Tensor());
  }
  // A tensor that `send_task` pushes here with its fetch of a bundle (see
  // above): waits for it to arrive, making no call. A rendezvous that
  // cannot take pushes fails the receive.
  virtual void RecvPushedAsync(int64_t step_id, const std::string& key, const std::string& send_task,
                               CancellationManager* cm, DoneCallback done) {
    done(absl::FailedPreconditionError("Receive of '" + key + "' waits for " + send_task +
                                       " to push it, which only a distributed step's rendezvous takes"),
         Tensor());
  }
};

// A tensor carried with a fetch to the task that receives it (a push). A
// large one (`fetch`) travels apart: the value stays with the sender and the
// receiver fetches it by its key.
struct PushedTensor {
  std::string key;
  Tensor value;
  bool fetch = false;
};

}  // namespace distflow
