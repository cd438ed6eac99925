// Explicit registration of every standard op definition, one function per
// family. OpRegistry::Global() calls RegisterAllOps once.
#pragma once

namespace distflow {

class OpRegistry;

void RegisterCoreOps(OpRegistry* r);       // Const, Placeholder, Identity, NoOp, StopGradient
void RegisterStateOps(OpRegistry* r);      // Variable, Assign, AssignAdd, AssignSub, IsVariableInitialized
void RegisterMathOps(OpRegistry* r);       // elementwise arithmetic, comparisons, logic, Cast, Select, AddN
void RegisterArrayOps(OpRegistry* r);      // Reshape, Shape, Concat, Slice, Pack, Transpose, Tile, OneHot, ...
void RegisterSliceOps(OpRegistry* r);      // StridedSlice, StridedSliceGrad, Split, SplitV
void RegisterDimsOps(OpRegistry* r);       // ExpandDims, Squeeze, Pad, PadV2, Where
void RegisterReductionOps(OpRegistry* r);  // Sum, Mean, Max, Min, Prod, ArgMax, ArgMin
void RegisterMatMulOps(OpRegistry* r);     // MatMul
void RegisterRandomOps(OpRegistry* r);     // RandomUniform, RandomStandardNormal, TruncatedNormal
void RegisterNnOps(OpRegistry* r);         // Conv2D, pooling, BiasAdd, activations, softmax losses, and their grads
void RegisterTopKLrnOps(OpRegistry* r);    // TopKV2, InTopKV2, LRN, LRNGrad
void RegisterTrainingOps(OpRegistry* r);   // ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp, ApplyAdam
void RegisterGradSupportOps(OpRegistry* r);  // BroadcastGradientArgs and other helpers of symbolic gradients
void RegisterCheckpointOps(OpRegistry* r);   // SaveShard, RestoreShard
void RegisterSyncOps(OpRegistry* r);         // accumulators and step barrier of synchronous training
void RegisterSummaryOps(OpRegistry* r);  // ScalarSummary, HistogramSummary, ImageSummary, TensorSummaryV2, MergeSummary
void RegisterSparseOps(
    OpRegistry* r);  // Gather(V2), Scatter*, Unique, UnsortedSegmentSum, DynamicPartition/Stitch, SparseSegment*
void RegisterGatherNdOps(OpRegistry* r);  // GatherNd, ScatterNd
void RegisterSparseTrainingOps(
    OpRegistry* r);                       // SparseApplyAdagrad, SparseApplyMomentum, SparseApplyFtrl, SparseApplyAdam
void RegisterDatasetOps(OpRegistry* r);   // tf.data: datasets and iterators
void RegisterFunctionOps(OpRegistry* r);  // Call (graph functions)
void RegisterQueueOps(OpRegistry* r);     // queues and readers of TF1 input pipelines
void RegisterParsingOps(OpRegistry* r);   // DecodeRaw, ParseExample
void RegisterControlFlowOps(OpRegistry* r);  // Switch, Merge, Enter, Exit, NextIteration, LoopCond, ControlTrigger
void RegisterCollectiveOps(OpRegistry* r);   // CollectiveReduce, CollectiveBcastSend/Recv, CollectiveGather
void RegisterTensorArrayOps(OpRegistry* r);  // TensorArrayV3 and its read, write, gather, scatter, ... ops

inline void RegisterAllOps(OpRegistry* r) {
  RegisterCoreOps(r);
  RegisterStateOps(r);
  RegisterMathOps(r);
  RegisterArrayOps(r);
  RegisterSliceOps(r);
  RegisterDimsOps(r);
  RegisterReductionOps(r);
  RegisterMatMulOps(r);
  RegisterRandomOps(r);
  RegisterNnOps(r);
  RegisterTopKLrnOps(r);
  RegisterTrainingOps(r);
  RegisterGradSupportOps(r);
  RegisterCheckpointOps(r);
  RegisterSyncOps(r);
  RegisterSummaryOps(r);
  RegisterSparseOps(r);
  RegisterGatherNdOps(r);
  RegisterSparseTrainingOps(r);
  RegisterDatasetOps(r);
  RegisterFunctionOps(r);
  RegisterQueueOps(r);
  RegisterParsingOps(r);
  RegisterControlFlowOps(r);
  RegisterCollectiveOps(r);
  RegisterTensorArrayOps(r);
}

}  // namespace distflow
