#include "distflow/tensor.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"

namespace distflow {

Tensor::Tensor(DataType dtype, const TensorShape& shape) {
  absl::StatusOr<Tensor> t = Allocate(dtype, shape);
  CHECK(t.ok()) << t.status();
  *this = std::move(*t);
}

absl::StatusOr<Tensor> Tensor::Allocate(DataType dtype, const TensorShape& shape) {
  if (!IsValidDataType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot allocate a tensor of dtype ", DataTypeName(dtype)));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<TensorBuffer> buf, TensorBuffer::Allocate(dtype, shape.num_elements()));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::move(buf);
  return t;
}

absl::StatusOr<Tensor> Tensor::FromBuffer(DataType dtype, const TensorShape& shape,
                                          std::shared_ptr<TensorBuffer> buffer, size_t offset) {
  if (dtype == DT_STRING || !IsValidDataType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("FromBuffer needs a fixed-size dtype, got ", DataTypeName(dtype)));
  }
  size_t need = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(shape.num_elements()), DataTypeSize(dtype), &need) ||
      buffer == nullptr || offset > buffer->size() || buffer->size() - offset < need) {
    return absl::InvalidArgumentError(absl::StrCat("Buffer of ", buffer ? buffer->size() : 0, " bytes at offset ",
                                                   offset, " is too small for a ", DataTypeName(dtype),
                                                   " tensor of shape ", shape.DebugString()));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::move(buffer);
  t.offset_ = offset;
  return t;
}

size_t Tensor::TotalBytes() const {
  if (dtype_ != DT_STRING) return static_cast<size_t>(NumElements()) * DataTypeSize(dtype_);
  size_t total = 0;
  for (const std::string& s : flat<std::string>()) total += s.size();
  return total;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  CHECK(dims() >= 1) << "Slice on a scalar";
  CHECK(0 <= begin && begin <= end && end <= dim_size(0))
      << "Slice [" << begin << ", " << end << ") of shape " << shape_.DebugString();
  Tensor t = *this;
  CHECK_OK(t.shape_.SetDim(0, end - begin));
  int64_t row = dim_size(0) == 0 ? 0 : NumElements() / dim_size(0);
  size_t elem = dtype_ == DT_STRING ? sizeof(std::string) : DataTypeSize(dtype_);
  t.offset_ = offset_ + static_cast<size_t>(begin * row) * elem;
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.num_elements() != NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot reshape a tensor of shape ", shape_.DebugString(), " (",
                                                   NumElements(), " elements) to ", shape.DebugString(), " (",
                                                   shape.num_elements(), " elements)"));
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::DeepCopy() const {
  if (!IsInitialized()) return Tensor();
  Tensor t(dtype_, shape_);
  if (dtype_ == DT_STRING) {
    auto src = flat<std::string>();
    auto dst = t.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  } else if (NumElements() > 0) {
    std::memcpy(t.raw_data(), raw_data(), TotalBytes());
  }
  return t;
}

namespace {

template <typename T>
void AppendElement(const T& v, std::string* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    absl::StrAppend(out, "'", absl::CHexEscape(v.size() > 64 ? v.substr(0, 64) + "..." : v), "'");
  } else if constexpr (std::is_same_v<T, bool>) {
    absl::StrAppend(out, v ? "True" : "False");
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    absl::StrAppend(out, static_cast<int>(v));
  } else {
    absl::StrAppend(out, v);
  }
}

template <typename T>
void AppendDim(absl::Span<const T> data, absl::Span<const int64_t> dims, int d, int64_t base, bool summarize, int edge,
               std::string* out) {
  int64_t n = dims[static_cast<size_t>(d)];
  int64_t stride = 1;
  for (size_t k = static_cast<size_t>(d) + 1; k < dims.size(); ++k) stride *= dims[k];
  out->push_back('[');
  bool elide = summarize && n > 2 * edge;
  for (int64_t i = 0; i < n; ++i) {
    if (elide && i == edge) {
      out->append(d + 1 == static_cast<int>(dims.size()) ? " ..." : "\n" + std::string(d + 1, ' ') + "...");
      i = n - edge - 1;
      continue;
    }
    if (i > 0) {
      if (d + 1 == static_cast<int>(dims.size())) {
        out->push_back(' ');
      } else {
        out->append("\n");
        out->append(std::string(d + 1, ' '));
      }
    }
    if (d + 1 == static_cast<int>(dims.size())) {
      AppendElement(data[static_cast<size_t>(base + i)], out);
    } else {
      AppendDim(data, dims, d + 1, base + i * stride, summarize, edge, out);
    }
  }
  out->push_back(']');
}

}  // namespace

std::string Tensor::DebugString(int64_t summarize_over, int edge_items) const {
  if (!IsInitialized()) return "<uninitialized tensor>";
  std::string out = absl::StrCat(DataTypeName(dtype_), " ", shape_.DebugString(), " ");
  VisitDataType(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto data = flat<T>();
    if (dims() == 0) {
      AppendElement(data[0], &out);
    } else {
      AppendDim<T>(data, shape_.dim_sizes(), 0, 0, NumElements() > summarize_over, edge_items, &out);
    }
  });
  return out;
}

}  // namespace distflow
