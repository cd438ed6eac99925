// Tensor <-> grpc::ByteBuffer for RecvTensor, without protobuf copies.
//
// Layout: a 4-byte little-endian header length, a serialized RecvTensorHeader
// (dtype, shape, strings for string tensors), then the raw element bytes.
// Encoding puts the element bytes in a slice that points at the tensor's own
// memory (the tensor is kept alive until gRPC releases the slice); decoding
// validates everything before allocating and copies once, slice by slice,
// into the new tensor's buffer. No size limits beyond the element count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/tensor.h"
#include "grpcpp/support/byte_buffer.h"

namespace distflow {

grpc::ByteBuffer EncodeTensorToByteBuffer(const Tensor& tensor);
// A header only: the bytes travel over the bulk port (bulk_transfer.h).
grpc::ByteBuffer EncodeBulkTensorHeader(const Tensor& tensor, uint64_t ticket, int port);

// Where a bulk answer's bytes are to be fetched from.
struct BulkRef {
  uint64_t ticket = 0;  // 0: the answer carried the bytes
  int port = 0;
};
// Decodes an answer. If `bulk` is non-null a header-only answer is accepted:
// the tensor is allocated but not filled and `bulk` says where its bytes are.
absl::StatusOr<Tensor> DecodeTensorFromByteBuffer(const grpc::ByteBuffer& buffer, BulkRef* bulk = nullptr);

// A bundle's answer (RecvTensorRequest.bundle_keys): per tensor, an 8-byte
// little-endian length, then the tensor encoded as above: inline, or a
// bulk header when the receiver accepts the bulk port and the tensor is
// large (the caller encodes each part and passes the parts in order).
grpc::ByteBuffer EncodeTensorBundle(const std::vector<grpc::ByteBuffer>& parts);
grpc::ByteBuffer EncodeTensorBundle(const std::vector<Tensor>& tensors);  // all inline
// Decodes a bundle of exactly `count` tensors (DataLoss otherwise). With
// `bulk` non-null, parts may be bulk headers: (*bulk)[i] says where tensor
// i's bytes are (ticket 0: they arrived inline).
absl::StatusOr<std::vector<Tensor>> DecodeTensorBundle(const grpc::ByteBuffer& buffer, size_t count,
                                                       std::vector<BulkRef>* bulk = nullptr);

// A bundle as one string (RecvTensorRequest.pushed) and back: of inline
// tensors, or of encoded parts (bulk headers among them); with `bulk`
// non-null, decoding accepts bulk headers as DecodeTensorBundle does.
std::string EncodeTensorBundleToString(const std::vector<Tensor>& tensors);
std::string EncodeTensorBundleToString(const std::vector<grpc::ByteBuffer>& parts);
absl::StatusOr<std::vector<Tensor>> DecodeTensorBundleFromString(const std::string& bytes, size_t count,
                                                                 std::vector<BulkRef>* bulk = nullptr);

}  // namespace distflow
