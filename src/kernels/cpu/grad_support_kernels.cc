#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterGradSupportKernels(KernelRegistry* r) {}

}  // namespace distflow
