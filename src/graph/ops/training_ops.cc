#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterTrainingOps(OpRegistry* r) {}

}  // namespace distflow
