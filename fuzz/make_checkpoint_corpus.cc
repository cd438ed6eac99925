// Writes the seed corpus for checkpoint_fuzzer: valid data files and an
// index. Run: build/fuzz/make_checkpoint_corpus fuzz/corpus/checkpoint
#include <cstdio>
#include <string>

#include "base/env.h"
#include "tensor/checkpoint_format.h"

using distflow::Tensor;
using distflow::TensorShape;
namespace ck = distflow::checkpoint;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards = {
      {{"w", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}))},
       {"global_step", Tensor::Scalar<int64_t>(42)}},
      {{"b", Tensor::FromVector<double>({0.5, -1})}, {"mask", Tensor::FromVector<bool>({true, false, true})}},
      {{"empty", Tensor(distflow::DT_FLOAT, TensorShape({0, 4}))}, {"bytes", Tensor::FromVector<uint8_t>({0, 255})}},
  };
  distflow::proto::CheckpointIndex index;
  index.set_format_version(ck::kFormatVersion);
  index.set_num_shards(static_cast<int>(shards.size()));
  index.set_global_step(7);
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i < shards.size(); ++i) {
    distflow::proto::CheckpointShardFooter footer;
    absl::StatusOr<std::string> data = ck::EncodeShard(shards[i], &footer);
    if (!data.ok()) return 1;
    files.emplace_back("data_" + std::to_string(i), *data);
    for (auto e : footer.entry()) {
      e.set_shard(static_cast<int>(i));
      *index.add_entry() = e;
    }
  }
  files.emplace_back("index", ck::EncodeIndex(index));
  for (const auto& [name, contents] : files) {
    absl::Status s = distflow::Env::Default()->WriteFileAtomically(std::string(argv[1]) + "/" + name, contents);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("wrote %zu seeds to %s\n", files.size(), argv[1]);
  return 0;
}
