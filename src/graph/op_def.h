// Op definitions and the op registry.
//
// An OpDef says what a node of that op looks like: typed inputs and outputs
// (a fixed dtype, a type attribute "T", a list "N * T", a list of mixed
// dtypes "Tlist" whose attribute is list(type), or a reference to a
// variable "Ref(T)"), attributes with kinds, defaults and allowed types, a
// stateful flag, and a shape function that runs when a node is added to a
// graph so that shape errors surface at build time.
//
// Ops are written with OpDefBuilder in the style of TensorFlow's REGISTER_OP,
// but registered by explicit functions (see graph/ops/all_ops.h), never by
// static initialisers.
//
//   registry->Register(OpDefBuilder("MatMul")
//       .Input("a: T").Input("b: T").Output("product: T")
//       .Attr("transpose_a: bool = false").Attr("transpose_b: bool = false")
//       .Attr("T: {float, double, int32, int64}")
//       .SetShapeFn(MatMulShape));
//
// OpRegistry is thread-safe; an OpDef never changes once registered.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "distflow/types.h"
#include "proto/graph.pb.h"

namespace distflow {

class InferenceContext;
using ShapeFn = std::function<absl::Status(InferenceContext*)>;

struct ArgDef {
  std::string name;
  DataType type = DT_INVALID;  // a fixed dtype, or DT_INVALID with type_attr set
  std::string type_attr;       // the attribute that holds the dtype
  std::string number_attr;     // non-empty for "N * T": N tensors of one dtype
  std::string type_list_attr;  // non-empty for "name: Tlist" (a list(type) attribute): a tensor per dtype
  bool is_ref = false;         // "Ref(T)": a mutable reference to a variable
};

struct AttrDef {
  std::string name;
  std::string kind;  // int, float, bool, string, type, shape, tensor, list(int), list(float), list(type)
  bool has_default = false;
  proto::AttrValue default_value;
  std::vector<DataType> allowed_types;  // for kind "type": empty means any
  bool has_minimum = false;             // for kind "int": "N: int >= 1"
  int64_t minimum = 0;
};

struct OpDef {
  std::string name;
  std::vector<ArgDef> inputs;
  std::vector<ArgDef> outputs;
  std::vector<AttrDef> attrs;
  bool is_stateful = false;
  ShapeFn shape_fn;  // may be empty: outputs then have unknown shape

  const AttrDef* FindAttr(const std::string& attr_name) const;
};

class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string name);

  // "name: T", "name: float", "name: N * T", "name: Ref(T)".
  OpDefBuilder& Input(std::string spec);
  OpDefBuilder& Output(std::string spec);
  // "T: {float, double}", "T: type", "N: int >= 1", "transpose_a: bool = false",
  // "shape: shape", "value: tensor", "perm: list(int)", "container: string = ''",
  // "axis: int = -1", "alpha: float = 0.2", "dtype: type = float32".
  OpDefBuilder& Attr(std::string spec);
  OpDefBuilder& SetIsStateful();
  OpDefBuilder& SetShapeFn(ShapeFn fn);

  // Parses the specs; InvalidArgument naming the op and the bad spec.
  absl::StatusOr<OpDef> Build() const;

 private:
  OpDef partial_;
  std::vector<std::string> inputs_, outputs_, attrs_;
};

class OpRegistry {
 public:
  OpRegistry() = default;

  // The process-wide registry holding every standard op (registered on first use).
  static OpRegistry* Global();

  // AlreadyExists if an op of that name is registered; InvalidArgument on a bad spec.
  absl::Status Register(const OpDefBuilder& builder);
  // Like Register, but a failure is a programming error (CHECK).
  void MustRegister(const OpDefBuilder& builder);

  // nullptr if unknown.
  const OpDef* LookUp(const std::string& op) const;
  // NotFound naming the op and suggesting the closest registered names.
  absl::StatusOr<const OpDef*> LookUpOrError(const std::string& op) const;

  std::vector<std::string> ListOps() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<OpDef>> ops_ ABSL_GUARDED_BY(mu_);
};

// Up to `max` names from `candidates` closest to `name` by edit distance, for
// "did you mean" suggestions in error messages.
std::vector<std::string> ClosestNames(const std::string& name, const std::vector<std::string>& candidates,
                                      size_t max = 3);

}  // namespace distflow
