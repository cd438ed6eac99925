#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterMatMulOps(OpRegistry* r) {}

}  // namespace distflow
