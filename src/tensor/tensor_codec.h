// Conversion between Tensor and its wire format, proto::TensorProto.
//
// Decoding treats its input as hostile: every field is validated before any
// memory is allocated for it, so a truncated or forged message yields
// InvalidArgument naming the problem, never a crash or a huge allocation.
#pragma once

#include "absl/status/statusor.h"
#include "distflow/tensor.h"

namespace distflow {
namespace proto {
class TensorProto;
class TensorShapeProto;
}  // namespace proto

void EncodeTensor(const Tensor& tensor, proto::TensorProto* out);
absl::StatusOr<Tensor> DecodeTensor(const proto::TensorProto& in);

void EncodeShape(const TensorShape& shape, proto::TensorShapeProto* out);
// A fully known shape: unknown_rank or a -1 dimension is an error here.
absl::StatusOr<TensorShape> DecodeShape(const proto::TensorShapeProto& in);

// SerializeTensor and ParseTensor (the fuzzer's entry point), the public
// forms of these, are in distflow/tensor.h.

}  // namespace distflow
