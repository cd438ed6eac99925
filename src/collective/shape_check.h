// Catches ranks that run one CollectiveReduce on tensors of different dtypes
// or shapes (or with different merge ops or compression) instead of letting
// them hang. Which algorithm a rank takes depends on its tensor's size (the
// ring from 64 KiB, the direct exchange below; Adasum's vector halving from
// 64 KiB, its whole-tensor doubling below), so ranks whose sizes straddle a
// threshold would otherwise wait for messages under tags the others never
// send, until a timeout or forever.
//
// ShapeCheckedChannel wraps a run's channel and adds no message and no round
// trip: the first message this rank sends to each peer carries this rank's
// signature (dtype, shape, merge op, compression) ahead of its payload, and
// travels under one tag whatever the algorithm called it; the first receive
// this rank posts from each peer takes that message, checks the signature
// against its own and strips it. Every algorithm sends its first message to
// a peer under the tag under which that peer first receives from it (the
// ring's first segment, the direct exchange's tensor, Adasum's fold or first
// round, the stall check's announcement), so with equal signatures the
// rename changes nothing; with different ones, the algorithms may differ but
// the first messages still meet, and a mismatch is found on the first
// receive. The rank that finds it aborts the run (its pending receives and
// its peers' receives from it fail with the error, which names both ranks
// and both signatures); every algorithm needs every rank's part, so no rank
// completes and each fails as the abort reaches it.
//
// Thread-safe like the channel it wraps.
#pragma once

#include <memory>
#include <string>

#include "collective/transport.h"

namespace distflow {

// What every rank of a CollectiveReduce must agree on.
struct ReduceSignature {
  DataType dtype = DT_INVALID;
  TensorShape shape;
  MergeOp merge = MergeOp::kAdd;
  bool fp16 = false;

  // "float32 [2,3]", with " merge_op Adasum" or " compression fp16" when set.
  std::string DebugString() const;
};

// The tag every first message travels under (no algorithm uses it).
inline constexpr char kFirstMessageTag[] = "first";

// The bytes the signature adds to a first message carrying `payload`.
int64_t FirstMessageOverheadBytes(const ReduceSignature& signature, const TensorShape& payload);

std::shared_ptr<CollectiveChannel> MakeShapeCheckedChannel(std::shared_ptr<CollectiveChannel> inner,
                                                           ReduceSignature signature);

}  // namespace distflow
