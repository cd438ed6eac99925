// Calls of graph functions (proto/function.proto). A Call node carries its
// function serialized in the attribute `f` (and, when the client built one,
// the function computing its gradient in `grad_f`), so the function travels
// with the node to whichever task runs it. Its outputs take the shapes the
// function declares for its results.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "proto/function.pb.h"

namespace distflow {
namespace {

absl::Status CallShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(std::string f, GetAttrString(c->node(), "f"));
  proto::FunctionDef def;
  if (!def.ParseFromString(f)) return absl::InvalidArgumentError("attribute 'f' is not a serialized FunctionDef");
  if (def.arg_size() != c->num_inputs() || def.ret_size() != c->num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("function '", def.name(), "' takes ", def.arg_size(), " arguments and gives ", def.ret_size(),
                     " results, but the call has ", c->num_inputs(), " inputs and ", c->num_outputs(), " outputs"));
  }
  for (int i = 0; i < c->num_inputs(); ++i) {
    if (c->input_type(i) != static_cast<DataType>(def.arg_type(i))) {
      return absl::InvalidArgumentError(absl::StrCat("function '", def.name(), "' argument ", i, " is ",
                                                     DataTypeName(static_cast<DataType>(def.arg_type(i))), ", got ",
                                                     DataTypeName(c->input_type(i))));
    }
  }
  for (int i = 0; i < c->num_outputs(); ++i) {
    if (i < def.ret_shape_size()) {
      ASSIGN_OR_RETURN(PartialShape s, PartialShape::FromProto(def.ret_shape(i)));
      c->set_output(i, s);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterFunctionOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("Call")
                      .Input("args: Tin")
                      .Output("output: Tout")
                      .Attr("Tin: list(type)")
                      .Attr("Tout: list(type)")
                      .Attr("f: string")
                      .Attr("grad_f: string = ''")
                      .SetIsStateful()
                      .SetShapeFn(CallShape));
}

}  // namespace distflow
