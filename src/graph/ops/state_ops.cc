#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status VariableShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, GetAttrShape(c->node(), "shape"));
  c->set_output(0, s);
  return absl::OkStatus();
}

absl::Status AssignShape(InferenceContext* c) {
  absl::StatusOr<bool> validate = GetAttrBool(c->node(), "validate_shape");
  if (validate.ok() && *validate && !c->input(0).IsCompatibleWith(c->input(1))) {
    return absl::InvalidArgumentError(absl::StrCat("cannot assign a value of shape ", c->input(1).DebugString(),
                                                   " to a variable of shape ", c->input(0).DebugString()));
  }
  c->set_output(0, validate.ok() && *validate ? c->input(0) : c->input(1));
  return absl::OkStatus();
}

absl::Status UpdateShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> s = c->input(0).Merge(c->input(1));
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("update of shape ", c->input(1).DebugString(),
                                                   " does not match the variable's shape ", c->input(0).DebugString()));
  }
  c->set_output(0, *s);
  return absl::OkStatus();
}

}  // namespace

void RegisterStateOps(OpRegistry* r) {
  // A variable: its output is a reference that Assign-like ops update in place;
  // read by any other op, it yields the current value.
  r->MustRegister(OpDefBuilder("Variable")
                      .Output("ref: Ref(dtype)")
                      .Attr("shape: shape")
                      .Attr("dtype: type")
                      .Attr("container: string = ''")
                      .Attr("shared_name: string = ''")
                      .SetIsStateful()
                      .SetShapeFn(VariableShape));
  r->MustRegister(OpDefBuilder("Assign")
                      .Input("ref: Ref(T)")
                      .Input("value: T")
                      .Output("output_ref: Ref(T)")
                      .Attr("T: type")
                      .Attr("validate_shape: bool = true")
                      .Attr("use_locking: bool = true")
                      .SetShapeFn(AssignShape));
  for (const char* op : {"AssignAdd", "AssignSub"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("ref: Ref(T)")
                        .Input("value: T")
                        .Output("output_ref: Ref(T)")
                        .Attr("T: {float, double, int32, int64}")
                        .Attr("use_locking: bool = false")
                        .SetShapeFn(UpdateShape));
  }
  r->MustRegister(OpDefBuilder("IsVariableInitialized")
                      .Input("ref: Ref(dtype)")
                      .Output("is_initialized: bool")
                      .Attr("dtype: type")
                      .SetShapeFn(ScalarShape));
}

}  // namespace distflow
