// Going on building a graph after a failed op. A Scope keeps the first error
// made while building its graph (distflow/scope.h): later ops become no-ops
// and Session::Run reports it, which suits a C++ program that checks
// status() once at the end. A client that reports each error to its user as
// it happens, such as the Python binding (the error is raised as an
// exception the program may catch, and TensorFlow 1 programs probe with
// try/except), takes the error out once it has reported it, so the graph
// stays usable: the failed op is not in the graph, and the next op is built
// as if it had never been tried.
#pragma once

#include "absl/status/status.h"
#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

// Returns the first error recorded in `scope`'s graph (OK if none) and clears
// it. Nodes added before the error stay in the graph. Thread-safe as
// Scope::status() is.
DISTFLOW_EXPORT absl::Status TakeScopeStatus(const Scope& scope);

}  // namespace distflow
