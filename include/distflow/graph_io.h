// A graph in and out of its serialized form: what export_meta_graph and
// import_meta_graph (Python) and a C++ program that ships a graph to another
// process use.
//
//   std::string bytes = SerializeGraph(scope);            // a GraphDef
//   Scope other = Scope::NewRootScope();
//   absl::StatusOr<std::vector<Operation>> ops = ImportGraph(other, bytes, "copy/");
//
// ImportGraph adds each node as `prefix` + its name, after the nodes it reads,
// with its device (or none, with clear_devices). While loops import and run:
// a Merge's input from a NextIteration (the loop's back edge) is connected
// after every node is in. (Gradients through an imported loop are not
// available: the loop's body function does not travel with the graph.) A
// damaged GraphDef, an input that names no node, two nodes of one name or a
// cycle that is not a loop's back edge is found before any node is added,
// and is an error naming the node. A node the graph itself rejects (an op this build
// does not know) fails the import part way, and the scope keeps the error.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

DISTFLOW_EXPORT std::string SerializeGraph(const Scope& scope);

DISTFLOW_EXPORT absl::StatusOr<std::vector<Operation>> ImportGraph(const Scope& scope, const std::string& graph_def,
                                                                   const std::string& prefix = "",
                                                                   bool clear_devices = false);

}  // namespace distflow
