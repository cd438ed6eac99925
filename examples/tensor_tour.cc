// A tour of distflow's tensors: every dtype, a zero-copy slice, and a round
// trip through the validated wire format, including a truncated message that
// is rejected with a clear error instead of a crash.
#include <cstdio>
#include <string>

#include "distflow/tensor.h"

using namespace distflow;

int main() {
  Tensor images = Tensor::FromVector<float>({0.f, .25f, .5f, .75f, 1.f, .5f}, TensorShape({3, 2}));
  std::printf("a batch of 3 tiny images:\n%s\n", images.DebugString().c_str());
  Tensor second = images.Slice(1, 3);
  std::printf("rows 1..3, sharing memory (%s):\n%s\n", second.SharesBufferWith(images) ? "yes" : "no",
              second.DebugString().c_str());

  std::string bytes = SerializeTensor(Tensor::FromVector<std::string>({"Hello,", "distributed", "TensorFlow!"}));
  absl::StatusOr<Tensor> back = ParseTensor(bytes.data(), bytes.size());
  if (!back.ok()) return 1;
  std::printf("decoded from %zu wire bytes: %s\n", bytes.size(), back->DebugString().c_str());

  bytes = SerializeTensor(images);
  bytes.resize(bytes.size() - 10);  // a truncated message
  absl::StatusOr<Tensor> bad = ParseTensor(bytes.data(), bytes.size());
  std::printf("a truncated message is rejected: %s\n", bad.status().ToString().c_str());
  return bad.ok() ? 1 : 0;
}
