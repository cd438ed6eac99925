// What a kernel whose work an input's value sets can tell the executor.
//
// OpKernel::EstimatedWork sees only the inputs' shapes; for BroadcastTo,
// Fill or Tile it returns -1 (the output's size is an input's value), and
// the executor then hands the kernel to the inter-op pool, which costs a
// thread wake-up and two context switches even for a 32,768-element
// broadcast. A kernel that also implements this interface is asked again
// with the input values the executor holds when the node becomes ready, so a
// small one runs inline like any other cheap kernel. The executor finds it
// with a dynamic_cast once, when it builds its plan.
//
// Implementations are const and thread-safe (called on any thread, for
// concurrent steps).
#pragma once

#include <cstdint>
#include <vector>

#include "distflow/tensor.h"

namespace distflow {

class WorkFromValues {
 public:
  virtual ~WorkFromValues() = default;
  // Roughly how many element operations Compute does for these inputs (one
  // per input, nullptr where the executor has no value, e.g. a variable), or
  // -1 if they do not tell.
  virtual int64_t EstimatedWorkFromValues(const std::vector<const Tensor*>& inputs) const = 0;
};

}  // namespace distflow
