#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterArrayKernels(KernelRegistry* r) {}

}  // namespace distflow
