// The runtime's side of graph functions (kernels/function.h): a
// FunctionInstance is the function's body as a Graph plus one Executor fed
// with the arguments and fetching the results, built once per (function,
// device, container). RegisterFunctionRuntime installs the instantiator;
// every session calls it when created (idempotent).
#pragma once

namespace distflow {

void RegisterFunctionRuntime();

}  // namespace distflow
