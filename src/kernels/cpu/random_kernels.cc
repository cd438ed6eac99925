#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterRandomKernels(KernelRegistry* r) {}

}  // namespace distflow
