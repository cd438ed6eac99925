#include "distflow/train/defer_updates.h"

#include "distflow/ops.h"
#include "placement/deferred_updates.h"

namespace distflow {

Operation DeferVariableUpdates(const Scope& scope, const Operation& train) {
  return ops::Raw(scope.WithControlDependencies({train}).WithFullOpName(train.name() + "_deferring_updates"), "NoOp",
                  {}, ops::Attrs{{kDeferVariableUpdatesAttr, true}});
}

}  // namespace distflow
