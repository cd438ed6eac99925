// Rendezvous: where a _Send kernel leaves a tensor and a _Recv kernel picks it
// up, keyed by (step id, edge key). The distributed runtime implements it: a
// Recv whose sender is on another task fetches the tensor from that task.
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

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
};

}  // namespace distflow
