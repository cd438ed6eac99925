#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {

void RegisterCoreOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("Const")
                      .Output("output: dtype")
                      .Attr("value: tensor")
                      .Attr("dtype: type")
                      .SetShapeFn([](InferenceContext* c) {
                        ASSIGN_OR_RETURN(Tensor v, GetAttrTensor(c->node(), "value"));
                        c->set_output(0, PartialShape(v.shape()));
                        return absl::OkStatus();
                      }));
  r->MustRegister(OpDefBuilder("Placeholder")
                      .Output("output: dtype")
                      .Attr("dtype: type")
                      .Attr("shape: shape")
                      .SetShapeFn([](InferenceContext* c) {
                        ASSIGN_OR_RETURN(PartialShape s, GetAttrShape(c->node(), "shape"));
                        c->set_output(0, s);
                        return absl::OkStatus();
                      }));
  r->MustRegister(OpDefBuilder("PlaceholderWithDefault")
                      .Input("input: dtype")
                      .Output("output: dtype")
                      .Attr("dtype: type")
                      .Attr("shape: shape")
                      .SetShapeFn([](InferenceContext* c) {
                        ASSIGN_OR_RETURN(PartialShape s, GetAttrShape(c->node(), "shape"));
                        if (!s.IsCompatibleWith(c->input(0))) {
                          return absl::InvalidArgumentError(absl::StrCat("default value of shape ",
                                                                         c->input(0).DebugString(),
                                                                         " does not fit shape ", s.DebugString()));
                        }
                        c->set_output(0, s);
                        return absl::OkStatus();
                      }));
  r->MustRegister(
      OpDefBuilder("Identity").Input("input: T").Output("output: T").Attr("T: type").SetShapeFn(UnchangedShape));
  r->MustRegister(
      OpDefBuilder("StopGradient").Input("input: T").Output("output: T").Attr("T: type").SetShapeFn(UnchangedShape));
  r->MustRegister(OpDefBuilder("NoOp").SetShapeFn(UnknownShape));

  // Transfers across partitions, inserted by the partitioner. `key` names the
  // edge; `send_task` is the task that produces it; `bundle` (if any) the
  // keys of the step's transfers from that task fetched with it in one call;
  // `push` (if any) the keys of tensors this task sends that task, carried
  // with that fetch; `pushed`: this tensor arrives so, and is not fetched
  // (placement/transfer_bundles.h).
  r->MustRegister(OpDefBuilder("_Send")
                      .Input("tensor: T")
                      .Attr("T: type")
                      .Attr("key: string")
                      .SetIsStateful()
                      .SetShapeFn(UnknownShape));
  r->MustRegister(OpDefBuilder("_Recv")
                      .Output("tensor: tensor_type")
                      .Attr("tensor_type: type")
                      .Attr("key: string")
                      .Attr("send_task: string")
                      .Attr("shape: shape")
                      .Attr("bundle: list(string) = []")
                      .Attr("push: list(string) = []")
                      .Attr("pushed: bool = false")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        absl::StatusOr<PartialShape> s = GetAttrShape(c->node(), "shape");
                        c->set_output(0, s.ok() ? *s : PartialShape::Unknown());
                        return absl::OkStatus();
                      }));
}

}  // namespace distflow
