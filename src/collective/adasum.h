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
// How the ranks combine (AdasumAllReduce, whole-tensor form; the
// vector-halving form below combines the same tree), with p the largest
// power of two not above n:
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

// How the ranks 0..p-1 exchange (the folding of ranks p..n-1 is the same):
//  - kWholeTensor: recursive doubling as above; every round sends the whole
//    tensor (log2 p rounds, log2 p times the tensor's bytes per rank).
//  - kVectorHalving: Horovod's (the Adasum paper's) recursive vector-halving
//    distance-doubling. In round k = 1, 2, 4, ... rank r and rank r xor k
//    each keep one half of the part they hold (the lower rank the first
//    half) and send the other half, so each rank combines only its half;
//    the dot products a.b, |a|^2, |b|^2 of the whole operands are the sum
//    of the 2k ranks' partial ones (exchanged by recursive doubling, 4
//    doubles per message). After log2 p rounds every rank holds 1/p of the
//    result, and the reverse rounds (distance halving, vector doubling)
//    gather it. Each rank sends 2 (1 - 1/p) times the tensor's bytes: the
//    same as whole-tensor for p = 2 (with half the arithmetic), 3/4 of it for
//    p = 4, 7/12 for p = 8. The combination is the same; only the order in
//    which the partial dot products are summed differs, so results agree
//    with kWholeTensor within rounding. Each element is combined on one rank
//    only, so every rank still ends with the same bytes.
//  - kAuto: kVectorHalving for tensors of kAdasumHalvingMinBytes or more
//    (and at least n elements), kWholeTensor below, where its log2 p rounds
//    beat the halving's 2 log2 p data rounds plus the dot-product rounds.
enum class AdasumAlgorithm { kAuto, kWholeTensor, kVectorHalving };
inline constexpr int64_t kAdasumHalvingMinBytes = 64 * 1024;

// Whether kAuto takes kVectorHalving for `buf` among `n` ranks.
bool AdasumUsesVectorHalving(const Tensor& buf, int n);

// Reduces `buf` (owned by the caller, shared with no one) in place. Every
// rank must pass the same algorithm.
void AdasumAllReduce(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done,
                     AdasumAlgorithm algorithm = AdasumAlgorithm::kAuto);

// Adasum(a, b) as a new tensor (same dtype and element count as `a`, float32
// or float64); InvalidArgument otherwise.
absl::StatusOr<Tensor> AdasumCombine(const Tensor& a, const Tensor& b);

}  // namespace distflow
