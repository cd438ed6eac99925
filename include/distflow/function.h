// Graph functions from the client: MakeFunctionDef turns a graph built in
// its own Scope (the function's body: its arguments are Placeholders, its
// results any outputs) into a serialized FunctionDef, the value of a Call
// node's `f` attribute (ops::Raw(s, "Call", args, {{"f", def}, ...})).
// Gradients flow through a Call: its gradient is a Call of the function's
// symbolic gradient (the body's backward graph, built by Gradients), made
// when the gradient is asked for, or taken from the node's `grad_f`.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

// `args` must be Placeholder outputs of `body`'s graph, `rets` outputs of
// it; InvalidArgument naming the culprit otherwise.
DISTFLOW_EXPORT absl::StatusOr<std::string> MakeFunctionDef(const Scope& body, const std::string& name,
                                                            const std::vector<Output>& args,
                                                            const std::vector<Output>& rets);

// The serialized gradient of a serialized function: a function of
// (args..., one upstream gradient per result) giving one gradient per
// argument (zeros for an argument the results do not depend on or that is
// not float/double).
DISTFLOW_EXPORT absl::StatusOr<std::string> MakeGradientFunctionDef(const std::string& function_def);

}  // namespace distflow
