// What the op registry holds, for programs that build nodes generically:
// distflow's Python client generates its op functions from this, and
// ops::Raw (distflow/ops.h) adds a node of any op listed here.
//
//   for (const OpInfo& op : RegisteredOps()) std::printf("%s\n", op.name.c_str());
//
// Thread-safe; the ops never change once registered.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/types.h"

namespace distflow {

// An input or output of an op: a tensor of a fixed dtype or of the dtype an
// attribute holds; a list of N tensors of one dtype ("N * T"); a list of
// tensors of the dtypes a list(type) attribute holds; or a reference to a
// variable.
struct DISTFLOW_EXPORT OpArgInfo {
  std::string name;
  DataType type = DT_INVALID;  // the fixed dtype, or DT_INVALID when type_attr says
  std::string type_attr;       // the type attribute ("T")
  std::string number_attr;     // "N" for "N * T"
  std::string type_list_attr;  // for a list of mixed dtypes
  bool is_ref = false;
};

struct DISTFLOW_EXPORT OpAttrInfo {
  std::string name;
  // "int", "float", "bool", "string", "type", "shape", "tensor",
  // "list(int)", "list(float)", "list(type)", "list(string)".
  std::string kind;
  bool has_default = false;
  std::string default_value;            // printable ("false", "'SAME'", "[]"), if has_default
  std::vector<DataType> allowed_types;  // for "type": empty means any
  // Whether Raw may leave it out: it has a default, or it is a type or
  // length attribute that the inputs determine.
  bool inferred = false;
};

struct DISTFLOW_EXPORT OpInfo {
  std::string name;
  std::vector<OpArgInfo> inputs;
  std::vector<OpArgInfo> outputs;
  std::vector<OpAttrInfo> attrs;
  bool is_stateful = false;
};

// Every registered op, sorted by name.
DISTFLOW_EXPORT std::vector<OpInfo> RegisteredOps();
// One op; NotFound naming it and the closest registered names.
DISTFLOW_EXPORT absl::StatusOr<OpInfo> LookUpOp(const std::string& name);

}  // namespace distflow
