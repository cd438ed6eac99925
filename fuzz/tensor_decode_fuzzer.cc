// libFuzzer target for the tensor decoder: arbitrary bytes are parsed as a
// TensorProto and decoded. Decoding must never crash; whatever decodes must
// re-encode and decode to an identical tensor.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "proto/tensor.pb.h"
#include "tensor/tensor_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<distflow::Tensor> t = distflow::ParseTensor(data, size);
  if (!t.ok()) return 0;
  distflow::proto::TensorProto again;
  distflow::EncodeTensor(*t, &again);
  absl::StatusOr<distflow::Tensor> u = distflow::DecodeTensor(again);
  if (!u.ok() || u->dtype() != t->dtype() || u->shape() != t->shape()) std::abort();
  if (t->dtype() == distflow::DT_STRING) {
    auto a = t->flat<std::string>();
    auto b = u->flat<std::string>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) std::abort();
  } else if (t->TotalBytes() > 0 && std::memcmp(t->raw_data(), u->raw_data(), t->TotalBytes()) != 0) {
    std::abort();
  }
  return 0;
}
