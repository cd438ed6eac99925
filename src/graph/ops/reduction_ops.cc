#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterReductionOps(OpRegistry* r) {}

}  // namespace distflow
