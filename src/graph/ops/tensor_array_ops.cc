// TensorFlow's TensorArray ops (V3 names and signatures, so imported TF1
// graphs run): TensorArrayV3 makes an array of one step (kernels/cpu/
// tensor_array.h) and outputs its handle (string [2]: container, name) and a
// flow (a float scalar). Writes, scatter and split take a flow and output a
// new one; reads, gather, concat and size take one: the flow orders the ops
// on one array as data dependencies do, and carries the gradient's order
// back (client/grad/tensor_array_grad.cc). The handle's values are not
// differentiable; the flow's gradient is a float scalar token.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status HandleAndFlow(InferenceContext* c) {
  c->set_output(0, PartialShape({2}));
  c->set_output(1, PartialShape::Scalar());
  return absl::OkStatus();
}

absl::Status FlowOut(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

PartialShape ElementShapeAttr(InferenceContext* c, const char* attr) {
  absl::StatusOr<PartialShape> s = GetAttrShape(c->node(), attr);
  return s.ok() ? *s : PartialShape::Unknown();
}

// [n, element...] with n the length of input `indices` when known.
absl::Status Stacked(InferenceContext* c, int indices) {
  PartialShape es = ElementShapeAttr(c, "element_shape");
  int64_t n = -1;
  if (indices >= 0 && c->input(indices).rank() == 1) n = c->input(indices).dim(0);
  if (es.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  PartialShape out({n});
  for (int64_t d : es.dims()) out.AppendDim(d);
  c->set_output(0, out);
  return absl::OkStatus();
}

}  // namespace

void RegisterTensorArrayOps(OpRegistry* r) {
  // A new array of `size` elements (more as they are written with
  // dynamic_size). clear_after_read and identical_element_shapes are
  // accepted and have no effect: elements stay until the step ends, and
  // stack checks that they share a shape.
  r->MustRegister(OpDefBuilder("TensorArrayV3")
                      .Input("size: int32")
                      .Output("handle: string")
                      .Output("flow: float")
                      .Attr("dtype: type")
                      .Attr("element_shape: shape = ?")
                      .Attr("dynamic_size: bool = false")
                      .Attr("clear_after_read: bool = true")
                      .Attr("identical_element_shapes: bool = false")
                      .Attr("tensor_array_name: string = ''")
                      .SetIsStateful()
                      .SetShapeFn(HandleAndFlow));
  // The gradient array of `handle` for one gradient computation (`source`):
  // made on first use, shared by every op that asks with the same source.
  r->MustRegister(OpDefBuilder("TensorArrayGradV3")
                      .Input("handle: string")
                      .Input("flow_in: float")
                      .Output("grad_handle: string")
                      .Output("flow_out: float")
                      .Attr("source: string")
                      .SetIsStateful()
                      .SetShapeFn(HandleAndFlow));
  r->MustRegister(OpDefBuilder("TensorArrayWriteV3")
                      .Input("handle: string")
                      .Input("index: int32")
                      .Input("value: T")
                      .Input("flow_in: float")
                      .Output("flow_out: float")
                      .Attr("T: type")
                      .SetIsStateful()
                      .SetShapeFn(FlowOut));
  r->MustRegister(OpDefBuilder("TensorArrayReadV3")
                      .Input("handle: string")
                      .Input("index: int32")
                      .Input("flow_in: float")
                      .Output("value: dtype")
                      .Attr("dtype: type")
                      .Attr("element_shape: shape = ?")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        c->set_output(0, ElementShapeAttr(c, "element_shape"));
                        return absl::OkStatus();
                      }));
  r->MustRegister(OpDefBuilder("TensorArrayGatherV3")
                      .Input("handle: string")
                      .Input("indices: int32")
                      .Input("flow_in: float")
                      .Output("value: dtype")
                      .Attr("dtype: type")
                      .Attr("element_shape: shape = ?")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return Stacked(c, 1); }));
  r->MustRegister(OpDefBuilder("TensorArrayScatterV3")
                      .Input("handle: string")
                      .Input("indices: int32")
                      .Input("value: T")
                      .Input("flow_in: float")
                      .Output("flow_out: float")
                      .Attr("T: type")
                      .SetIsStateful()
                      .SetShapeFn(FlowOut));
  r->MustRegister(OpDefBuilder("TensorArrayConcatV3")
                      .Input("handle: string")
                      .Input("flow_in: float")
                      .Output("value: dtype")
                      .Output("lengths: int64")
                      .Attr("dtype: type")
                      .Attr("element_shape_except0: shape = ?")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        PartialShape es = ElementShapeAttr(c, "element_shape_except0");
                        PartialShape out = PartialShape::Unknown();
                        if (!es.unknown_rank()) {
                          out = PartialShape({-1});
                          for (int64_t d : es.dims()) out.AppendDim(d);
                        }
                        c->set_output(0, out);
                        c->set_output(1, PartialShape({-1}));
                        return absl::OkStatus();
                      }));
  r->MustRegister(OpDefBuilder("TensorArraySplitV3")
                      .Input("handle: string")
                      .Input("value: T")
                      .Input("lengths: int64")
                      .Input("flow_in: float")
                      .Output("flow_out: float")
                      .Attr("T: type")
                      .SetIsStateful()
                      .SetShapeFn(FlowOut));
  r->MustRegister(OpDefBuilder("TensorArraySizeV3")
                      .Input("handle: string")
                      .Input("flow_in: float")
                      .Output("size: int32")
                      .SetIsStateful()
                      .SetShapeFn(ScalarShape));
  r->MustRegister(
      OpDefBuilder("TensorArrayCloseV3").Input("handle: string").SetIsStateful().SetShapeFn([](InferenceContext*) {
        return absl::OkStatus();
      }));
}

}  // namespace distflow
