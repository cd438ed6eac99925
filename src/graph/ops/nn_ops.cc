#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterNnOps(OpRegistry* r) {}

}  // namespace distflow
