#include "distflow/tensor_array.h"

#include "distflow/ops.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace {

Output Out(const Scope& s, const Operation& op, int i = 0) { return Output(op, i, s.WithOpName("")); }

}  // namespace

TensorArrayOutput TensorArray(const Scope& s, DataType dtype, const Output& size, const TensorArrayOptions& options) {
  Operation op = Raw(s, "TensorArrayV3", {size}, [&](proto::NodeDef* n) {
    SetAttrType(n, "dtype", dtype);
    SetAttrBool(n, "dynamic_size", options.dynamic_size);
    SetAttrShape(n, "element_shape", options.element_shape);
    SetAttrString(n, "tensor_array_name", options.name);
  });
  return {Out(s, op, 0), Out(s, op, 1)};
}

Output TensorArrayWrite(const Scope& s, const Output& handle, const Output& index, const Output& value,
                        const Output& flow) {
  return Out(s, Raw(s, "TensorArrayWriteV3", {handle, index, value, flow}));
}

Output TensorArrayScatter(const Scope& s, const Output& handle, const Output& indices, const Output& value,
                          const Output& flow) {
  return Out(s, Raw(s, "TensorArrayScatterV3", {handle, indices, value, flow}));
}

Output TensorArrayUnstack(const Scope& s, const Output& handle, const Output& value, const Output& flow) {
  Output rows = Slice(s, Shape(s, value), {0}, {1});
  Output indices = Range(s, Const(s, 0), Reshape(s, rows, std::vector<int64_t>{}), Const(s, 1));
  return TensorArrayScatter(s, handle, indices, value, flow);
}

Output TensorArraySplit(const Scope& s, const Output& handle, const Output& value, const Output& lengths,
                        const Output& flow) {
  return Out(s, Raw(s, "TensorArraySplitV3", {handle, value, lengths, flow}));
}

Output TensorArrayRead(const Scope& s, const Output& handle, const Output& index, const Output& flow, DataType dtype,
                       const PartialShape& element_shape) {
  return Out(s, Raw(s, "TensorArrayReadV3", {handle, index, flow}, [&](proto::NodeDef* n) {
               SetAttrType(n, "dtype", dtype);
               SetAttrShape(n, "element_shape", element_shape);
             }));
}

Output TensorArrayGather(const Scope& s, const Output& handle, const Output& indices, const Output& flow,
                         DataType dtype, const PartialShape& element_shape) {
  return Out(s, Raw(s, "TensorArrayGatherV3", {handle, indices, flow}, [&](proto::NodeDef* n) {
               SetAttrType(n, "dtype", dtype);
               SetAttrShape(n, "element_shape", element_shape);
             }));
}

Output TensorArrayStack(const Scope& s, const Output& handle, const Output& flow, DataType dtype,
                        const PartialShape& element_shape) {
  Output indices = Range(s, Const(s, 0), TensorArraySize(s, handle, flow), Const(s, 1));
  return TensorArrayGather(s, handle, indices, flow, dtype, element_shape);
}

std::pair<Output, Output> TensorArrayConcat(const Scope& s, const Output& handle, const Output& flow, DataType dtype) {
  Operation op =
      Raw(s, "TensorArrayConcatV3", {handle, flow}, [&](proto::NodeDef* n) { SetAttrType(n, "dtype", dtype); });
  return {Out(s, op, 0), Out(s, op, 1)};
}

Output TensorArraySize(const Scope& s, const Output& handle, const Output& flow) {
  return Out(s, Raw(s, "TensorArraySizeV3", {handle, flow}));
}

TensorArrayOutput TensorArrayGrad(const Scope& s, const Output& handle, const Output& flow, const std::string& source) {
  Operation op =
      Raw(s, "TensorArrayGradV3", {handle, flow}, [&](proto::NodeDef* n) { SetAttrString(n, "source", source); });
  return {Out(s, op, 0), Out(s, op, 1)};
}

}  // namespace ops
}  // namespace distflow
