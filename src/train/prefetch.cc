#include "distflow/train/prefetch.h"

#include "distflow/ops.h"
#include "placement/partition.h"

namespace distflow {

Operation PrefetchVariableReads(const Scope& scope, const Operation& train) {
  return ops::Raw(scope.WithControlDependencies({train}).WithFullOpName(train.name() + "_prefetching_reads"), "NoOp",
                  {}, ops::Attrs{{kPrefetchVariableReadsAttr, true}});
}

}  // namespace distflow
