// libFuzzer target for the checkpoint readers: arbitrary bytes are read as a
// data file (footer, entries, every tensor with its crc) and as an index.
// Reading must never crash; a data file that reads whole must encode again
// to a file that reads back to the same tensors.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tensor/checkpoint_format.h"

namespace ck = distflow::checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ck::ParseIndex(bytes, "fuzz.index");
  absl::StatusOr<ck::ParsedShard> shard = ck::ParseShard(bytes, "fuzz.data");
  if (!shard.ok()) return 0;
  std::vector<std::pair<std::string, distflow::Tensor>> tensors;
  for (const auto& e : shard->footer.entry()) {
    absl::StatusOr<distflow::Tensor> t = ck::ReadTensor(*shard, e);
    if (!t.ok()) return 0;
    tensors.emplace_back(e.name(), std::move(*t));
  }
  distflow::proto::CheckpointShardFooter footer;
  absl::StatusOr<std::string> again = ck::EncodeShard(tensors, &footer);
  if (!again.ok()) std::abort();
  absl::StatusOr<ck::ParsedShard> reparsed = ck::ParseShard(*again, "again");
  if (!reparsed.ok() || reparsed->footer.entry_size() != static_cast<int>(tensors.size())) std::abort();
  for (int i = 0; i < reparsed->footer.entry_size(); ++i) {
    absl::StatusOr<distflow::Tensor> t = ck::ReadTensor(*reparsed, reparsed->footer.entry(i));
    const distflow::Tensor& want = tensors[static_cast<size_t>(i)].second;
    if (!t.ok() || t->shape() != want.shape() || t->dtype() != want.dtype()) std::abort();
    if (want.TotalBytes() > 0 && std::memcmp(t->raw_data(), want.raw_data(), want.TotalBytes()) != 0) std::abort();
  }
  return 0;
}
