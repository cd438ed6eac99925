// Control flow in TensorFlow's dataflow form: Switch and Merge (conditionals),
// Enter, Exit, NextIteration and LoopCond (loops, with frames and iterations
// run by the executor). Their kernels only forward values; deadness, frames
// and iterations are the executor's (runtime/executor_frames.h).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status SwitchShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, "pred").status());
  c->set_output(0, c->input(0));
  c->set_output(1, c->input(0));
  return absl::OkStatus();
}

// The most specific shape every input fits: dimensions that differ become
// unknown, and different ranks an unknown rank (a loop's Merge sees the
// initial value and the next iteration's).
PartialShape RelaxedShape(const std::vector<PartialShape>& shapes) {
  PartialShape out = shapes.empty() ? PartialShape::Unknown() : shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) {
    const PartialShape& s = shapes[i];
    if (out.unknown_rank() || s.unknown_rank() || out.rank() != s.rank()) return PartialShape::Unknown();
    PartialShape relaxed({});
    for (int d = 0; d < s.rank(); ++d) relaxed.AppendDim(out.dim(d) == s.dim(d) ? s.dim(d) : -1);
    out = relaxed;
  }
  return out;
}

absl::Status MergeShape(InferenceContext* c) {
  std::vector<PartialShape> shapes;
  for (int i = 0; i < c->num_inputs(); ++i) shapes.push_back(c->input(i));
  c->set_output(0, RelaxedShape(shapes));
  c->set_output(1, PartialShape({}));
  return absl::OkStatus();
}

// Enter's output has its input's shape, or the loop's shape invariant for the
// variable (the internal attribute `_shape_invariant`, set by the while-loop
// builders), which the input must fit.
absl::Status EnterShape(InferenceContext* c) {
  if (!HasAttr(c->node(), "_shape_invariant")) {
    c->set_output(0, c->input(0));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(PartialShape inv, GetAttrShape(c->node(), "_shape_invariant"));
  if (!inv.IsCompatibleWith(c->input(0))) {
    return absl::InvalidArgumentError(absl::StrCat("the initial value's shape ", c->input(0).DebugString(),
                                                   " does not fit the shape invariant ", inv.DebugString()));
  }
  c->set_output(0, inv);
  return absl::OkStatus();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("Switch")
                      .Input("data: T")
                      .Input("pred: bool")
                      .Output("output_false: T")
                      .Output("output_true: T")
                      .Attr("T: type")
                      .SetShapeFn(SwitchShape));
  r->MustRegister(OpDefBuilder("Merge")
                      .Input("inputs: N * T")
                      .Output("output: T")
                      .Output("value_index: int32")
                      .Attr("T: type")
                      .Attr("N: int >= 1")
                      .SetShapeFn(MergeShape));
  r->MustRegister(OpDefBuilder("Enter")
                      .Input("data: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("frame_name: string")
                      .Attr("is_constant: bool = false")
                      .Attr("parallel_iterations: int = 10")
                      .SetShapeFn(EnterShape));
  r->MustRegister(OpDefBuilder("Exit").Input("data: T").Output("output: T").Attr("T: type").SetShapeFn(UnchangedShape));
  r->MustRegister(
      OpDefBuilder("NextIteration").Input("data: T").Output("output: T").Attr("T: type").SetShapeFn(UnchangedShape));
  r->MustRegister(
      OpDefBuilder("LoopCond").Input("input: bool").Output("output: bool").SetShapeFn([](InferenceContext* c) {
        ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(0), 0, "input"));
        c->set_output(0, s);
        return absl::OkStatus();
      }));
  // Waits for its control inputs, live or dead, and is always live (the
  // gradient of a while loop joins its branches with it).
  r->MustRegister(OpDefBuilder("ControlTrigger").SetShapeFn(UnknownShape));
  // TensorFlow's Assert: fails the step with InvalidArgument, "assertion
  // failed: " and each of `data` (a string as it is, another tensor as its
  // first `summarize` elements), when `condition` is false.
  r->MustRegister(OpDefBuilder("Assert")
                      .Input("condition: bool")
                      .Input("data: T")
                      .Attr("T: list(type)")
                      .Attr("summarize: int = 3")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        absl::StatusOr<PartialShape> s = c->WithRank(c->input(0), 0, "condition");
                        return s.ok() ? absl::OkStatus() : s.status();
                      }));
}

}  // namespace distflow
