// Registration of the tf.data kernels (kernels/cpu/all_kernels.h calls
// RegisterDatasetKernels).
#pragma once

namespace distflow {

class KernelRegistry;

namespace data {
void RegisterSourceDatasetKernels(KernelRegistry* r);     // TensorDataset, TensorSliceDataset, Range, files
void RegisterTransformDatasetKernels(KernelRegistry* r);  // batch, repeat, shuffle, take, skip, shard, zip, ...
void RegisterCacheDatasetKernels(KernelRegistry* r);      // CacheDataset (in memory or in a file)
void RegisterPrefetchDatasetKernels(KernelRegistry* r);   // PrefetchDataset
void RegisterIteratorKernels(KernelRegistry* r);          // Iterator, MakeIterator, OneShotIterator, IteratorGetNext
void RegisterFunctionDatasetKernels(KernelRegistry* r);   // MapDataset, FilterDataset
}  // namespace data

inline void RegisterDatasetKernels(KernelRegistry* r) {
  data::RegisterSourceDatasetKernels(r);
  data::RegisterTransformDatasetKernels(r);
  data::RegisterCacheDatasetKernels(r);
  data::RegisterPrefetchDatasetKernels(r);
  data::RegisterIteratorKernels(r);
  data::RegisterFunctionDatasetKernels(r);
}

}  // namespace distflow
