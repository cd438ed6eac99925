// The public view of the op registry (distflow/op_registry.h).
#include <set>

#include "base/status_macros.h"
#include "distflow/op_registry.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"

namespace distflow {
namespace {

OpArgInfo ArgInfo(const ArgDef& a) {
  OpArgInfo out;
  out.name = a.name;
  out.type = a.type;
  out.type_attr = a.type_attr;
  out.number_attr = a.number_attr;
  out.type_list_attr = a.type_list_attr;
  out.is_ref = a.is_ref;
  return out;
}

OpInfo Info(const OpDef& def) {
  OpInfo out;
  out.name = def.name;
  out.is_stateful = def.is_stateful;
  // Attributes the inputs determine: their type, length and type-list attributes.
  std::set<std::string> from_inputs;
  for (const ArgDef& a : def.inputs) {
    out.inputs.push_back(ArgInfo(a));
    for (const std::string* attr : {&a.type_attr, &a.number_attr, &a.type_list_attr}) {
      if (!attr->empty()) from_inputs.insert(*attr);
    }
  }
  for (const ArgDef& a : def.outputs) out.outputs.push_back(ArgInfo(a));
  for (const AttrDef& a : def.attrs) {
    OpAttrInfo attr;
    attr.name = a.name;
    attr.kind = a.kind;
    attr.has_default = a.has_default;
    if (a.has_default) attr.default_value = AttrDebugString(a.default_value);
    attr.allowed_types = a.allowed_types;
    attr.inferred = a.has_default || from_inputs.count(a.name) > 0;
    out.attrs.push_back(std::move(attr));
  }
  return out;
}

}  // namespace

std::vector<OpInfo> RegisteredOps() {
  const OpRegistry* registry = OpRegistry::Global();
  std::vector<OpInfo> out;
  for (const std::string& name : registry->ListOps()) {
    if (const OpDef* def = registry->LookUp(name)) out.push_back(Info(*def));
  }
  return out;
}

absl::StatusOr<OpInfo> LookUpOp(const std::string& name) {
  ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global()->LookUpOrError(name));
  return Info(*def);
}

}  // namespace distflow
