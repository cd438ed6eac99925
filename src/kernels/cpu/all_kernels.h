// Explicit registration of every CPU kernel, one function per family (the
// same families as graph/ops/all_ops.h). KernelRegistry::Global() calls
// RegisterAllCpuKernels once.
#pragma once

namespace distflow {

class KernelRegistry;

void RegisterCoreKernels(KernelRegistry* r);
void RegisterStateKernels(KernelRegistry* r);
void RegisterMathKernels(KernelRegistry* r);
void RegisterArrayKernels(KernelRegistry* r);
void RegisterReductionKernels(KernelRegistry* r);
void RegisterMatMulKernels(KernelRegistry* r);
void RegisterRandomKernels(KernelRegistry* r);
void RegisterNnKernels(KernelRegistry* r);
void RegisterTrainingKernels(KernelRegistry* r);
void RegisterGradSupportKernels(KernelRegistry* r);
void RegisterCheckpointKernels(KernelRegistry* r);
void RegisterSyncKernels(KernelRegistry* r);
void RegisterSummaryKernels(KernelRegistry* r);

inline void RegisterAllCpuKernels(KernelRegistry* r) {
  RegisterCoreKernels(r);
  RegisterStateKernels(r);
  RegisterMathKernels(r);
  RegisterArrayKernels(r);
  RegisterReductionKernels(r);
  RegisterMatMulKernels(r);
  RegisterRandomKernels(r);
  RegisterNnKernels(r);
  RegisterTrainingKernels(r);
  RegisterGradSupportKernels(r);
  RegisterCheckpointKernels(r);
  RegisterSyncKernels(r);
  RegisterSummaryKernels(r);
}

}  // namespace distflow
