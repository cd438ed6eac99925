// Collective algorithms over a CollectiveChannel (transport.h), written as
// state machines driven by the receives' callbacks: no thread waits, so any
// number of collectives can be in flight on a few threads without deadlock.
//
// All-reduce picks by size (AllReduce):
//  - ring (RingAllReduce) for tensors of kRingMinBytes or more: a
//    reduce-scatter then an all-gather around the ring, 2(n-1) steps of 1/n
//    of the tensor each, so every rank sends and receives 2(n-1)/n of the
//    bytes whatever n is. The tensor is cut into `pipeline` independent
//    rings of its parts (about kPipelinePieceBytes each), so one part's
//    bytes travel while another part is being reduced.
//  - direct exchange (DirectAllReduce) below: every rank sends its whole
//    tensor to every other and reduces all n in rank order; one round trip
//    instead of 2(n-1), which is what matters for small tensors.
// Both give every rank the same bytes (each element is reduced in one fixed
// order), so replicas stay identical.
//
// Each function calls `done` once, on any thread. On an error it aborts the
// channel, so the peers fail too instead of waiting.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "collective/transport.h"

namespace distflow {

inline constexpr int64_t kRingMinBytes = 64 * 1024;
inline constexpr int64_t kPipelinePieceBytes = 4 * 1024 * 1024;
inline constexpr int kMaxPipeline = 16;

using CollectiveStatusCallback = std::function<void(absl::Status)>;
using CollectiveTensorCallback = std::function<void(absl::StatusOr<Tensor>)>;

// Whether AllReduce takes the ring for `buf` among `n` ranks.
bool AllReduceUsesRing(const Tensor& buf, int n);

// Reduces `buf` (owned by the caller, shared with no one) in place.
void AllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op,
               CollectiveStatusCallback done);
// `pipeline` >= 1 independent rings (0: chosen from the size).
void RingAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op, int pipeline,
                   CollectiveStatusCallback done);
void DirectAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, MergeOp merge, FinalOp final_op,
                     CollectiveStatusCallback done);
// Broadcast: the sender (`is_sender`, with `value`) sends to every rank; the
// others get a tensor of `dtype` and `shape`. First every rank tells every
// other whether it sends, so the receivers learn the sender's rank (exactly
// one rank must send).
void Broadcast(std::shared_ptr<CollectiveChannel> ch, bool is_sender, const Tensor& value, DataType dtype,
               const TensorShape& shape, CollectiveTensorCallback done);
// Every rank's `value` concatenated along dimension 0 in rank order: same
// dtype and dimensions after the first everywhere, the first may differ
// (InvalidArgument naming both ranks and shapes otherwise).
void AllGather(std::shared_ptr<CollectiveChannel> ch, const Tensor& value, CollectiveTensorCallback done);

}  // namespace distflow
