#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterMathKernels(KernelRegistry* r) {}

}  // namespace distflow
