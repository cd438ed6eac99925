#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterReductionKernels(KernelRegistry* r) {}

}  // namespace distflow
