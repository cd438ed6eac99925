// The transport collectives run over, gloo's split: the algorithms
// (algorithms.h) see only these two interfaces, never a concrete transport.
// `CollectiveTransport` opens a `CollectiveChannel` for one run of one
// collective instance; the channel moves tensors between the group's ranks.
// Implementations: the worker's, over the transport seam that carries
// RecvTensor (worker/worker_collective_transport.h: the cluster token, TLS and
// bulk port hold for every byte), and an in-process one for tests
// (in_process_transport.h). Implementations are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distflow/tensor.h"
#include "kernels/collective.h"

namespace distflow {

class CollectiveChannel {
 public:
  using RecvCallback = std::function<void(absl::Status, Tensor)>;
  virtual ~CollectiveChannel() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How errors name a rank: "rank 2 (/job:worker/replica:0/task:2)".
  virtual std::string RankName(int rank) const = 0;
  // Leaves `value` for rank `to` under `tag`; never blocks. `value` must not
  // change afterwards (the receiver may read it later).
  virtual absl::Status Send(int to, const std::string& tag, const Tensor& value) = 0;
  // Calls `done` once, on any thread (possibly this one, before returning),
  // with what rank `from` sent under `tag`, or an error naming `from`.
  virtual void RecvAsync(int from, const std::string& tag, RecvCallback done) = 0;
  // Fails this rank's part of the run: its pending and later receives fail
  // with `status`, and so do the peers' receives of what it sent and has not
  // been taken, so no rank is left waiting on this one.
  virtual void Abort(const absl::Status& status) = 0;
};

class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;
  // A channel for run `seq` of the instance (group_key, instance_key) among
  // `params.group_size` ranks, this task's rank resolved by the transport.
  virtual absl::StatusOr<std::shared_ptr<CollectiveChannel>> Open(const CollectiveParams& params, int64_t seq) = 0;
};

}  // namespace distflow
