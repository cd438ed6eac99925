// Horovod's Adasum (adaptive summation; Maleki et al., "Scaling Distributed
// Training with Adaptive Summation", 2021): CollectiveReduce with
// merge_op="Adasum". Two gradients a and b combine as
//
//   Adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// (a + b when they are orthogonal, their mean when they are equal; a zero
// vector leaves the other as it is), and n gradients by combining halves
// recursively, over the whole tensor (the dot products span every element).
//
// How the ranks combine (AdasumAllReduce), with p the largest power of two
// not above n:
//  - ranks p..n-1 first send their tensors to ranks 0..n-p-1 (rank p + i to
//    rank i), which combine Adasum(own, received);
//  - ranks 0..p-1 then run recursive doubling: in round k (k = 1, 2, 4, ...
//    below p) rank r and rank r xor k exchange what they hold and both
//    compute Adasum(lower rank's, higher rank's);
//  - ranks 0..n-p-1 send the result back to ranks p..n-1.
// So for a power of two the tree is Horovod's ((g0 + g1) + (g2 + g3)) ...;
// for other sizes rank p + i's gradient is folded into rank i's first, e.g.
// for 3 ranks Adasum(Adasum(g0, g2), g1). Every rank computes the same
// combinations from the same operands in the same order, so every rank ends
// with the same bytes. Sums are taken in float64; each combination is
// rounded to the tensor's dtype. float32 and float64 only.
//
// Written as a state machine over the channel's callbacks (no thread
// waits), as algorithms.h's are. `done` is called once; on an error the
// channel is aborted, so the peers fail too.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "collective/algorithms.h"
#include "collective/transport.h"

namespace distflow {

// Reduces `buf` (owned by the caller, shared with no one) in place.
void AdasumAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done);

// Adasum(a, b) as a new tensor (same dtype and element count as `a`, float32
// or float64); InvalidArgument otherwise.
absl::StatusOr<Tensor> AdasumCombine(const Tensor& a, const Tensor& b);

}  // namespace distflow
