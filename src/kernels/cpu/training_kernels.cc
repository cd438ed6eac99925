#include "kernels/kernel_registry.h"

namespace distflow {

void RegisterTrainingKernels(KernelRegistry* r) {}

}  // namespace distflow
