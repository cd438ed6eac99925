#include "tensor/tensor_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "proto/tensor.pb.h"

namespace distflow {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensor_content is little-endian; a big-endian host needs byte swapping here");

void EncodeShape(const TensorShape& shape, proto::TensorShapeProto* out) {
  out->Clear();
  for (int64_t d : shape.dim_sizes()) out->add_dim(d);
}

absl::StatusOr<TensorShape> DecodeShape(const proto::TensorShapeProto& in) {
  if (in.unknown_rank()) {
    return absl::InvalidArgumentError("Tensor shape has unknown rank; a tensor needs a full shape");
  }
  if (in.dim_size() > TensorShape::kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Tensor shape has rank ", in.dim_size(), "; the maximum is ", TensorShape::kMaxRank));
  }
  return TensorShape::FromDims(absl::Span<const int64_t>(in.dim().data(), static_cast<size_t>(in.dim_size())));
}

void EncodeTensor(const Tensor& tensor, proto::TensorProto* out) {
  out->Clear();
  out->set_dtype(static_cast<proto::DataType>(tensor.dtype()));
  EncodeShape(tensor.shape(), out->mutable_shape());
  if (tensor.dtype() == DT_STRING) {
    for (const std::string& s : tensor.flat<std::string>()) out->add_string_val(s);
  } else if (tensor.IsInitialized() && tensor.NumElements() > 0) {
    out->set_tensor_content(static_cast<const char*>(tensor.raw_data()), tensor.TotalBytes());
  }
}

absl::StatusOr<Tensor> DecodeTensor(const proto::TensorProto& in) {
  int raw_dtype = static_cast<int>(in.dtype());
  if (!IsValidDataType(raw_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto has unknown dtype ", raw_dtype));
  }
  DataType dtype = static_cast<DataType>(raw_dtype);
  ASSIGN_OR_RETURN(TensorShape shape, DecodeShape(in.shape()));
  const int64_t n = shape.num_elements();

  if (dtype == DT_STRING) {
    if (!in.tensor_content().empty()) {
      return absl::InvalidArgumentError("A string TensorProto must carry string_val, not tensor_content");
    }
    if (in.string_val_size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("String TensorProto of shape ", shape.DebugString(), " needs ", n,
                                                     " string_val entries, found ", in.string_val_size()));
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
    auto f = t.flat<std::string>();
    for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = in.string_val(static_cast<int>(i));
    return t;
  }

  if (in.string_val_size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("A ", DataTypeName(dtype), " TensorProto must not carry string_val"));
  }
  // The byte count must match exactly before anything is allocated: the payload
  // itself bounds the allocation, whatever the shape claims.
  size_t expected = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(n), DataTypeSize(dtype), &expected) ||
      expected != in.tensor_content().size()) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto of dtype ", DataTypeName(dtype), " and shape ",
                                                   shape.DebugString(), " needs ", n, " x ", DataTypeSize(dtype),
                                                   " bytes of content, found ", in.tensor_content().size()));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (expected > 0) std::memcpy(t.raw_data(), in.tensor_content().data(), expected);
  if (dtype == DT_BOOL) {
    // Only 0 and 1 are valid bools; anything else is undefined behaviour to read.
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    for (size_t i = 0; i < expected; ++i) {
      if (p[i] > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("Bool TensorProto element ", i, " has byte value ", static_cast<int>(p[i])));
      }
    }
  }
  return t;
}

std::string SerializeTensor(const Tensor& tensor) {
  proto::TensorProto wire;
  EncodeTensor(tensor, &wire);
  return wire.SerializeAsString();
}

absl::StatusOr<Tensor> ParseTensor(const void* data, size_t size) {
  if (size > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto of ", size, " bytes is over 2 GiB"));
  }
  proto::TensorProto p;
  if (!p.ParseFromArray(data, static_cast<int>(size))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot parse ", size, " bytes as a TensorProto (truncated or corrupt)"));
  }
  return DecodeTensor(p);
}

}  // namespace distflow
