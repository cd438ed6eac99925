#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterGradSupportOps(OpRegistry* r) {}

}  // namespace distflow
