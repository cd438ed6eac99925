// Small helpers to write GraphDefs by hand in runtime tests.
#pragma once

#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "proto/graph.pb.h"

namespace distflow {
namespace test {

inline proto::NodeDef* AddNode(proto::GraphDef* g, const std::string& name, const std::string& op,
                               const std::vector<std::string>& inputs = {}) {
  proto::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (const std::string& i : inputs) n->add_input(i);
  return n;
}

inline proto::NodeDef* AddConst(proto::GraphDef* g, const std::string& name, const Tensor& value) {
  proto::NodeDef* n = AddNode(g, name, "Const");
  SetAttrTensor(n, "value", value);
  SetAttrType(n, "dtype", value.dtype());
  return n;
}

inline proto::NodeDef* AddVariable(proto::GraphDef* g, const std::string& name, const PartialShape& shape,
                                   DataType dtype, const std::string& container = "") {
  proto::NodeDef* n = AddNode(g, name, "Variable");
  SetAttrShape(n, "shape", shape);
  SetAttrType(n, "dtype", dtype);
  if (!container.empty()) SetAttrString(n, "container", container);
  return n;
}

inline proto::NodeDef* AddPlaceholder(proto::GraphDef* g, const std::string& name, DataType dtype,
                                      const PartialShape& shape) {
  proto::NodeDef* n = AddNode(g, name, "Placeholder");
  SetAttrType(n, "dtype", dtype);
  SetAttrShape(n, "shape", shape);
  return n;
}

}  // namespace test
}  // namespace distflow
