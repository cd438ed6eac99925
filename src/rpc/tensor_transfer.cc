#include "rpc/tensor_transfer.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/bytes_copied.h"
#include "base/status_macros.h"
#include "proto/worker.pb.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

void ReleaseTensor(void* user_data) { delete static_cast<Tensor*>(user_data); }

// Copies `n` bytes starting at byte `offset` of the slices into `dst`.
void Gather(const std::vector<grpc::Slice>& slices, size_t offset, size_t n, char* dst) {
  for (const grpc::Slice& s : slices) {
    if (n == 0) return;
    if (offset >= s.size()) {
      offset -= s.size();
      continue;
    }
    size_t take = std::min(n, s.size() - offset);
    std::memcpy(dst, s.begin() + offset, take);
    dst += take;
    n -= take;
    offset = 0;
  }
}

std::string HeaderPrefix(const proto::RecvTensorHeader& header) {
  std::string head;
  header.SerializeToString(&head);
  uint32_t len = static_cast<uint32_t>(head.size());
  std::string prefix(4, '\0');
  for (int i = 0; i < 4; ++i) prefix[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  return prefix + head;
}

}  // namespace

grpc::ByteBuffer EncodeBulkTensorHeader(const Tensor& tensor, uint64_t ticket, int port) {
  proto::RecvTensorHeader header;
  header.set_dtype(static_cast<proto::DataType>(tensor.dtype()));
  EncodeShape(tensor.shape(), header.mutable_shape());
  header.set_bulk_ticket(ticket);
  header.set_bulk_port(port);
  std::string prefix = HeaderPrefix(header);
  grpc::Slice slice(prefix.data(), prefix.size());
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer EncodeTensorToByteBuffer(const Tensor& tensor) {
  proto::RecvTensorHeader header;
  if (!tensor.IsInitialized()) {
    header.set_is_dead(true);  // sent by a dead _Send
    std::string prefix = HeaderPrefix(header);
    grpc::Slice slice(prefix.data(), prefix.size());
    return grpc::ByteBuffer(&slice, 1);
  }
  header.set_dtype(static_cast<proto::DataType>(tensor.dtype()));
  EncodeShape(tensor.shape(), header.mutable_shape());
  if (tensor.dtype() == DT_STRING) {
    for (const std::string& s : tensor.flat<std::string>()) header.add_string_val(s);
  }
  std::string prefix = HeaderPrefix(header);
  std::vector<grpc::Slice> slices;
  slices.emplace_back(prefix.data(), prefix.size());
  size_t bytes = tensor.dtype() == DT_STRING ? 0 : tensor.TotalBytes();
  if (bytes > 0) {
    auto* keep = new Tensor(tensor);
    slices.emplace_back(const_cast<void*>(keep->raw_data()), bytes, &ReleaseTensor, keep);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<Tensor> DecodeTensorFromByteBuffer(const grpc::ByteBuffer& buffer, BulkRef* bulk) {
  if (bulk != nullptr) *bulk = BulkRef();
  std::vector<grpc::Slice> slices;
  grpc::Status st = buffer.Dump(&slices);
  if (!st.ok()) return absl::DataLossError(absl::StrCat("Cannot read the tensor payload: ", st.error_message()));
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  if (total < 4) return absl::DataLossError(absl::StrCat("Tensor payload of ", total, " bytes is truncated"));
  char len_bytes[4];
  Gather(slices, 0, 4, len_bytes);
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<uint8_t>(len_bytes[i])) << (8 * i);
  if (len > total - 4) {
    return absl::DataLossError(absl::StrCat("Tensor header claims ", len, " bytes but the payload has ", total - 4));
  }
  std::string head(len, '\0');
  Gather(slices, 4, len, head.data());
  proto::RecvTensorHeader header;
  if (!header.ParseFromString(head)) return absl::DataLossError("Tensor header is corrupt");
  if (header.is_dead()) {
    if (total - 4 - len != 0 || header.bulk_ticket() != 0) return absl::DataLossError("A dead tensor with a payload");
    return Tensor();
  }
  int raw_dtype = header.dtype();
  if (!IsValidDataType(raw_dtype))
    return absl::DataLossError(absl::StrCat("Tensor header has unknown dtype ", raw_dtype));
  DataType dtype = static_cast<DataType>(raw_dtype);
  absl::StatusOr<TensorShape> shape = DecodeShape(header.shape());
  if (!shape.ok()) return absl::DataLossError(shape.status().message());
  size_t body = total - 4 - len;
  if (header.bulk_ticket() != 0) {
    if (bulk == nullptr)
      return absl::DataLossError("Got a bulk-transfer header where the tensor's bytes were expected");
    if (dtype == DT_STRING || dtype == DT_BOOL || body != 0 || header.bulk_port() <= 0 || header.bulk_port() > 65535) {
      return absl::DataLossError(absl::StrCat("Malformed bulk-transfer header (dtype ", DataTypeName(dtype), ", port ",
                                              header.bulk_port(), ", ", body, " extra bytes)"));
    }
    size_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(shape->num_elements()), DataTypeSize(dtype), &bytes)) {
      return absl::DataLossError("Bulk-transfer header describes a tensor too large to address");
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, *shape));
    bulk->ticket = header.bulk_ticket();
    bulk->port = header.bulk_port();
    return t;
  }
  if (dtype == DT_STRING) {
    if (header.string_val_size() != shape->num_elements() || body != 0) {
      return absl::DataLossError(absl::StrCat("String tensor of shape ", shape->DebugString(), " carries ",
                                              header.string_val_size(), " strings and ", body, " extra bytes"));
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, *shape));
    auto f = t.flat<std::string>();
    for (int i = 0; i < header.string_val_size(); ++i) f[static_cast<size_t>(i)] = header.string_val(i);
    return t;
  }
  size_t expected = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(shape->num_elements()), DataTypeSize(dtype), &expected) ||
      expected != body) {
    return absl::DataLossError(absl::StrCat("Tensor of dtype ", DataTypeName(dtype), " and shape ",
                                            shape->DebugString(), " needs ", shape->num_elements(), " x ",
                                            DataTypeSize(dtype), " bytes but ", body, " arrived (truncated?)"));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, *shape));
  if (expected > 0) {
    Gather(slices, 4 + len, expected, static_cast<char*>(t.raw_data()));
    static Counter* copied = BytesCopiedCounter("grpc_tensor_decode");
    copied->Increment(static_cast<double>(expected));
  }
  if (dtype == DT_BOOL) {
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    for (size_t i = 0; i < expected; ++i)
      if (p[i] > 1) return absl::DataLossError("Bool tensor holds a byte other than 0 or 1");
  }
  return t;
}

}  // namespace distflow

namespace distflow {

grpc::ByteBuffer EncodeTensorBundle(const std::vector<Tensor>& tensors) {
  std::vector<grpc::ByteBuffer> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(EncodeTensorToByteBuffer(t));
  return EncodeTensorBundle(parts);
}

grpc::ByteBuffer EncodeTensorBundle(const std::vector<grpc::ByteBuffer>& parts) {
  std::vector<grpc::Slice> slices;
  for (const grpc::ByteBuffer& part : parts) {
    std::vector<grpc::Slice> one;
    (void)part.Dump(&one);  // a buffer built from slices always dumps
    uint64_t len = 0;
    for (const grpc::Slice& s : one) len += s.size();
    char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    slices.emplace_back(prefix, sizeof(prefix));
    for (grpc::Slice& s : one) slices.push_back(std::move(s));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<std::vector<Tensor>> DecodeTensorBundle(const grpc::ByteBuffer& buffer, size_t count,
                                                       std::vector<BulkRef>* bulk) {
  if (bulk != nullptr) bulk->assign(count, BulkRef());
  std::vector<grpc::Slice> slices;
  grpc::Status st = buffer.Dump(&slices);
  if (!st.ok()) return absl::DataLossError(absl::StrCat("Cannot read the bundle's payload: ", st.error_message()));
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  std::vector<Tensor> out;
  size_t offset = 0;
  while (out.size() < count) {
    if (total - offset < 8) {
      return absl::DataLossError(
          absl::StrCat("A bundle of ", count, " tensors is truncated after ", out.size(), " (", total, " bytes)"));
    }
    char len_bytes[8];
    Gather(slices, offset, 8, len_bytes);
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<uint8_t>(len_bytes[i])) << (8 * i);
    offset += 8;
    if (len > total - offset) {
      return absl::DataLossError(
          absl::StrCat("Tensor ", out.size(), " of a bundle claims ", len, " bytes but ", total - offset, " remain"));
    }
    // The tensor's own slices: views of the received ones, not copies.
    std::vector<grpc::Slice> part;
    size_t skip = offset, need = static_cast<size_t>(len);
    for (const grpc::Slice& s : slices) {
      if (need == 0) break;
      if (skip >= s.size()) {
        skip -= s.size();
        continue;
      }
      size_t take = std::min(need, s.size() - skip);
      part.push_back(s.sub(skip, skip + take));
      need -= take;
      skip = 0;
    }
    grpc::ByteBuffer one(part.data(), part.size());
    absl::StatusOr<Tensor> t = DecodeTensorFromByteBuffer(one, bulk != nullptr ? &(*bulk)[out.size()] : nullptr);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("Tensor ", out.size(), " of a bundle: ", t.status().message()));
    }
    out.push_back(std::move(*t));
    offset += static_cast<size_t>(len);
  }
  if (offset != total) {
    return absl::DataLossError(
        absl::StrCat("A bundle of ", count, " tensors carries ", total - offset, " extra bytes"));
  }
  return out;
}

namespace {

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);  // a buffer built from slices always dumps
  std::string out;
  size_t size = 0;
  for (const grpc::Slice& s : slices) size += s.size();
  out.reserve(size);
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace

std::string EncodeTensorBundleToString(const std::vector<Tensor>& tensors) {
  return ToString(EncodeTensorBundle(tensors));
}

std::string EncodeTensorBundleToString(const std::vector<grpc::ByteBuffer>& parts) {
  return ToString(EncodeTensorBundle(parts));
}

absl::StatusOr<std::vector<Tensor>> DecodeTensorBundleFromString(const std::string& bytes, size_t count,
                                                                 std::vector<BulkRef>* bulk) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buffer(&slice, 1);
  return DecodeTensorBundle(buffer, count, bulk);
}

}  // namespace distflow
