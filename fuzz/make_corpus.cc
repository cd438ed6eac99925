// Writes the seed corpus for tensor_decode_fuzzer: one valid serialized
// TensorProto per dtype and a few edge shapes. Run:
//   build/fuzz/make_tensor_corpus fuzz/corpus/tensor_decode
#include <cstdio>
#include <string>

#include "base/env.h"
#include "proto/tensor.pb.h"
#include "tensor/tensor_codec.h"

using distflow::Tensor;
using distflow::TensorShape;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const Tensor seeds[] = {
      Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3})),
      Tensor::FromVector<double>({1.5, -2.5}),
      Tensor::FromVector<int32_t>({7, -7, 0}),
      Tensor::FromVector<int64_t>({1, 2}, TensorShape({1, 2})),
      Tensor::FromVector<uint8_t>({0, 255}),
      Tensor::FromVector<bool>({true, false}),
      Tensor::FromVector<std::string>({"hello", "", "world"}),
      Tensor::Scalar<float>(1.f),
      Tensor(distflow::DT_FLOAT, TensorShape({0, 5})),
  };
  int i = 0;
  for (const Tensor& t : seeds) {
    distflow::proto::TensorProto p;
    distflow::EncodeTensor(t, &p);
    std::string path = std::string(argv[1]) + "/seed_" + std::to_string(i++);
    absl::Status s = distflow::Env::Default()->WriteFileAtomically(path, p.SerializeAsString());
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("wrote %d seeds to %s\n", i, argv[1]);
  return 0;
}
