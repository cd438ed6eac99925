// The files of a checkpoint (formats in proto/checkpoint.proto): data files
// written by the tasks that hold the variables, and the index the saving
// client writes last.
//
// Every file ends in the same trailer: [footer bytes][u32 crc32c of the
// footer][u64 footer length][8-byte magic], little-endian. Readers check the
// trailer, the footer's crc, and every entry's bounds, dtype, shape and size
// before touching the payload; a tensor's bytes are checked against their
// crc32c when read. A checkpoint file is read with the same distrust as a
// network message: nothing in it can crash the reader, and every error
// names the file and what is wrong with it (DataLoss for damage).
//
// Free functions, no state: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "distflow/tensor.h"
#include "proto/checkpoint.pb.h"

namespace distflow::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr int kMaxShards = 100000;

// CRC-32C (Castagnoli) of `data`, as iSCSI and TensorFlow's checkpoints use.
uint32_t Crc32c(absl::string_view data);

// "<prefix>.data-00000-of-00002" and "<prefix>.index".
std::string DataFileName(absl::string_view prefix, int shard, int num_shards);
std::string IndexFileName(absl::string_view prefix);

// A data file holding `tensors` (name, value) in order, as pieces written
// one after another: each tensor's bytes, viewed in place (the tensors must
// outlive it), then the framed footer. Saving this way needs no second copy
// of the variables in memory.
struct EncodedShard {
  std::vector<absl::string_view> payload;  // the tensors' bytes
  std::string trailer;                     // the footer, framed
  // Every piece of the file, in order.
  std::vector<absl::string_view> Pieces() const;
};
// InvalidArgument naming the tensor if one cannot be saved (a string tensor).
absl::StatusOr<EncodedShard> EncodeShardPieces(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                               proto::CheckpointShardFooter* footer);
// The same file in one string.
absl::StatusOr<std::string> EncodeShard(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        proto::CheckpointShardFooter* footer);

// A data file, parsed and checked: every entry lies inside the payload and
// its size matches its dtype and shape. `contents` must outlive it.
struct ParsedShard {
  std::string path;
  proto::CheckpointShardFooter footer;
  absl::string_view payload;
};
absl::StatusOr<ParsedShard> ParseShard(absl::string_view contents, const std::string& path);

// The tensor of `entry` (one of shard.footer's), its crc verified.
absl::StatusOr<Tensor> ReadTensor(const ParsedShard& shard, const proto::CheckpointEntry& entry);

// A footer followed by the trailer: what ends every checkpoint file.
std::string FrameFooter(const google::protobuf::MessageLite& footer);

// The contents of an index file, and its parse: format version, shard
// count, and entries (unique names, shards in range, sizes that match).
std::string EncodeIndex(const proto::CheckpointIndex& index);
absl::StatusOr<proto::CheckpointIndex> ParseIndex(absl::string_view contents, const std::string& path);

// Copies the block of `size` at `src_begin` of a row-major array of shape
// `src_dims` to `dst_begin` of one of shape `dst_dims` (elements of
// `elem_bytes`): how a restore fills a variable from a checkpoint's slices.
// InvalidArgument if the ranks differ or the block lies outside either.
absl::Status CopyBlock(const char* src, absl::Span<const int64_t> src_dims, absl::Span<const int64_t> src_begin,
                       char* dst, absl::Span<const int64_t> dst_dims, absl::Span<const int64_t> dst_begin,
                       absl::Span<const int64_t> size, size_t elem_bytes);

// "float32[784,10]": how errors and listings name an entry's type.
std::string EntryTypeString(const proto::CheckpointEntry& entry);

}  // namespace distflow::checkpoint
