// libFuzzer target for graph import, what a master does with CreateSession
// and ExtendSession requests and a worker with RegisterGraph: arbitrary bytes
// are parsed as a GraphDef and imported (node validation, op lookup,
// attributes, type and shape inference). Importing must never crash; an
// imported graph must export, re-import to as many nodes, and accept its own
// export as an extension (every node already present and identical).
#include <cstdint>
#include <cstdlib>

#include "google/protobuf/stubs/logging.h"
#include "graph/graph.h"
#include "proto/graph.pb.h"

// Protobuf logs every string field with invalid UTF-8; the parse failing is
// all that matters here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distflow::proto::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<std::unique_ptr<distflow::Graph>> g = distflow::Graph::FromGraphDef(def);
  if (!g.ok()) return 0;
  distflow::proto::GraphDef out;
  (*g)->ToGraphDef(&out);
  absl::StatusOr<std::unique_ptr<distflow::Graph>> again = distflow::Graph::FromGraphDef(out);
  if (!again.ok() || (*again)->num_nodes() != (*g)->num_nodes()) std::abort();
  if (!(*g)->Extend(out).ok()) std::abort();
  return 0;
}
