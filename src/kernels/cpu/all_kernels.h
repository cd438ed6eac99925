// Explicit registration of every CPU kernel, one function per family (the
// same families as graph/ops/all_ops.h). KernelRegistry::Global() calls
// RegisterAllCpuKernels once.
#pragma once

#include "kernels/data/dataset_kernels.h"

namespace distflow {

class KernelRegistry;

void RegisterCoreKernels(KernelRegistry* r);
void RegisterStateKernels(KernelRegistry* r);
void RegisterMathKernels(KernelRegistry* r);
void RegisterMathUnaryKernels(KernelRegistry* r);  // Log1p, Expm1, Reciprocal, Sin, Cos, Floor, Ceil, Round, Is*
void RegisterCastSelectKernels(KernelRegistry* r);
void RegisterArrayKernels(KernelRegistry* r);
void RegisterSliceKernels(KernelRegistry* r);  // StridedSlice(Grad), Split, SplitV
void RegisterDimsKernels(KernelRegistry* r);   // ExpandDims, Squeeze, Pad, PadV2, Where
void RegisterReductionKernels(KernelRegistry* r);
void RegisterMatMulKernels(KernelRegistry* r);
void RegisterRandomKernels(KernelRegistry* r);
void RegisterNnKernels(KernelRegistry* r);
void RegisterTopKLrnKernels(KernelRegistry* r);  // TopKV2, InTopKV2, LRN, LRNGrad
void RegisterTrainingKernels(KernelRegistry* r);
void RegisterGradSupportKernels(KernelRegistry* r);
void RegisterCheckpointKernels(KernelRegistry* r);
void RegisterSyncKernels(KernelRegistry* r);
void RegisterSummaryKernels(KernelRegistry* r);
void RegisterSparseKernels(
    KernelRegistry* r);  // Gather(V2), Unique, UnsortedSegmentSum, DynamicPartition/Stitch, SparseSegment*
void RegisterScatterKernels(KernelRegistry* r);         // ScatterAdd, ScatterSub, ScatterUpdate
void RegisterGatherNdKernels(KernelRegistry* r);        // GatherNd, ScatterNd
void RegisterSparseTrainingKernels(KernelRegistry* r);  // SparseApply{Adagrad,Momentum,Ftrl,Adam}
void RegisterFunctionKernels(KernelRegistry* r);        // Call
void RegisterQueueKernels(KernelRegistry* r);           // FIFOQueue, RandomShuffleQueue, PaddingFIFOQueue and their ops
void RegisterReaderKernels(KernelRegistry* r);          // TFRecordReader, FixedLengthRecordReader, ..., ReaderRead
void RegisterParsingKernels(KernelRegistry* r);         // DecodeRaw, ParseExample
void RegisterControlFlowKernels(KernelRegistry* r);     // Switch, Merge, Enter, Exit, NextIteration, LoopCond
void RegisterCollectiveKernels(KernelRegistry* r);      // CollectiveReduce, CollectiveBcastSend/Recv, CollectiveGather
void RegisterTensorArrayKernels(KernelRegistry* r);     // TensorArrayV3 and its ops

inline void RegisterAllCpuKernels(KernelRegistry* r) {
  RegisterCoreKernels(r);
  RegisterStateKernels(r);
  RegisterMathKernels(r);
  RegisterMathUnaryKernels(r);
  RegisterCastSelectKernels(r);
  RegisterArrayKernels(r);
  RegisterSliceKernels(r);
  RegisterDimsKernels(r);
  RegisterReductionKernels(r);
  RegisterMatMulKernels(r);
  RegisterRandomKernels(r);
  RegisterNnKernels(r);
  RegisterTopKLrnKernels(r);
  RegisterTrainingKernels(r);
  RegisterGradSupportKernels(r);
  RegisterCheckpointKernels(r);
  RegisterSyncKernels(r);
  RegisterSummaryKernels(r);
  RegisterSparseKernels(r);
  RegisterScatterKernels(r);
  RegisterGatherNdKernels(r);
  RegisterSparseTrainingKernels(r);
  RegisterDatasetKernels(r);
  RegisterFunctionKernels(r);
  RegisterQueueKernels(r);
  RegisterReaderKernels(r);
  RegisterParsingKernels(r);
  RegisterControlFlowKernels(r);
  RegisterCollectiveKernels(r);
  RegisterTensorArrayKernels(r);
}

}  // namespace distflow
