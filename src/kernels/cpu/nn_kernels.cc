#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterNnKernels(KernelRegistry* r) {}

}  // namespace distflow
