// CollectiveExecutorImpl: the CollectiveExecutor (kernels/collective.h) of
// one task. It pairs runs across ranks by counting: the k-th run of an
// instance (group_key, instance_key) on one rank meets the k-th run of it on
// every other rank, which holds because every rank of a synchronous program
// runs the same ops the same number of times. Each run gets a channel from
// the transport, is cancelled with the step (the kernel's
// CancellationManager) or after the op's timeout_seconds, and errors name
// the op, the run and the rank they came from.
//
// Every run is also watched by the stall check (stall_check.h), which
// reports runs that wait on ranks of their group for longer than its
// interval.
//
// Owns its transport. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "collective/stall_check.h"
#include "collective/transport.h"
#include "kernels/collective.h"

namespace distflow {

class CollectiveExecutorImpl final : public CollectiveExecutor {
 public:
  explicit CollectiveExecutorImpl(std::unique_ptr<CollectiveTransport> transport, StallCheckOptions stall_check = {})
      : transport_(std::move(transport)), stall_check_(std::move(stall_check)) {}

  void Run(const CollectiveParams& params, const Tensor& input, CancellationManager* cm, DoneCallback done) override;

 private:
  int64_t NextSeq(int64_t group_key, int64_t instance_key);

  const std::unique_ptr<CollectiveTransport> transport_;
  const StallCheckOptions stall_check_;
  absl::Mutex mu_;
  std::map<std::pair<int64_t, int64_t>, int64_t> next_seq_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
