// What adasum.cc (the whole-tensor form and the entry point) and
// adasum_halving.cc (the vector-halving form) share; see adasum.h.
#pragma once

#include <memory>

#include "collective/algorithms.h"
#include "collective/transport.h"

namespace distflow {

inline int LargestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// AdasumAllReduce's kVectorHalving: `buf` float32 or float64, non-empty,
// among 2 or more ranks.
void StartVectorHalvingAdasum(std::shared_ptr<CollectiveChannel> ch, Tensor buf, CollectiveStatusCallback done);

}  // namespace distflow
