// Tensor <-> grpc::ByteBuffer for RecvTensor, without protobuf copies.
//
// Layout: a 4-byte little-endian header length, a serialized RecvTensorHeader
// (dtype, shape, strings for string tensors), then the raw element bytes.
// Encoding puts the element bytes in a slice that points at the tensor's own
// memory (the tensor is kept alive until gRPC releases the slice); decoding
// validates everything before allocating and copies once, slice by slice,
// into the new tensor's buffer. No size limits beyond the element count.
#pragma once

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "tensor/tensor.h"

namespace distflow {

grpc::ByteBuffer EncodeTensorToByteBuffer(const Tensor& tensor);
absl::StatusOr<Tensor> DecodeTensorFromByteBuffer(const grpc::ByteBuffer& buffer);

}  // namespace distflow
