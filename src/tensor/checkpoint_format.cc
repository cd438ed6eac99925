#include "tensor/checkpoint_format.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace distflow::checkpoint {
namespace {

constexpr char kMagic[8] = {'D', 'F', 'C', 'K', 'P', 'T', '0', '1'};
constexpr size_t kTrailerSize = 4 + 8 + sizeof(kMagic);

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutFixed64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetFixed(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

absl::Status Damaged(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("Checkpoint file '", path, "' is damaged: ", what));
}

void AppendFooter(const google::protobuf::MessageLite& footer, std::string* out) {
  std::string bytes = footer.SerializeAsString();
  out->append(bytes);
  PutFixed32(out, Crc32c(bytes));
  PutFixed64(out, bytes.size());
  out->append(kMagic, sizeof(kMagic));
}

// Checks the trailer and the footer's crc; splits `contents` into payload and footer.
absl::Status SplitFile(absl::string_view contents, const std::string& path, absl::string_view* payload,
                       absl::string_view* footer) {
  if (contents.size() < kTrailerSize) {
    return Damaged(path, absl::StrCat("it has ", contents.size(), " bytes, fewer than a checkpoint trailer (",
                                      kTrailerSize, "); it was probably cut short"));
  }
  const char* end = contents.data() + contents.size();
  if (std::memcmp(end - sizeof(kMagic), kMagic, sizeof(kMagic)) != 0) {
    return Damaged(path, "it does not end in the checkpoint magic (truncated, or not a distflow checkpoint)");
  }
  uint64_t len = GetFixed(end - sizeof(kMagic) - 8, 8);
  uint32_t crc = static_cast<uint32_t>(GetFixed(end - kTrailerSize, 4));
  if (len > contents.size() - kTrailerSize) {
    return Damaged(path, absl::StrCat("its footer claims ", len, " bytes but the file has only ", contents.size()));
  }
  size_t body = contents.size() - kTrailerSize - static_cast<size_t>(len);
  *payload = contents.substr(0, body);
  *footer = contents.substr(body, static_cast<size_t>(len));
  if (Crc32c(*footer) != crc) return Damaged(path, "the crc32c of its footer does not match");
  return absl::OkStatus();
}

// Checks one entry: a name, a fixed-size dtype, a known shape whose bytes
// are `size`, and bytes that lie inside a payload of `payload_size`.
// A slice lies inside its full variable: same rank, 0 <= offset and
// offset + the entry's dims <= the full dims.
absl::Status CheckSlice(const proto::CheckpointEntry& e, const TensorShape& shape, const std::string& who,
                        const std::string& path) {
  const proto::SaveSlice& sl = e.slice();
  if (sl.full_name().empty()) return Damaged(path, absl::StrCat(who, " is a slice of a variable with no name"));
  std::vector<int64_t> full_dims(sl.full_shape().dim().begin(), sl.full_shape().dim().end());
  absl::StatusOr<TensorShape> full = TensorShape::FromDims(full_dims);
  if (!full.ok() || sl.full_shape().unknown_rank()) {
    return Damaged(path, absl::StrCat(who, " is a slice of '", sl.full_name(), "' whose full shape is invalid"));
  }
  if (full->dims() != shape.dims() || sl.offset_size() != shape.dims()) {
    return Damaged(path, absl::StrCat(who, " is a slice ", shape.DebugString(), " of '", sl.full_name(), "' ",
                                      full->DebugString(), " with ", sl.offset_size(), " offsets"));
  }
  for (int d = 0; d < shape.dims(); ++d) {
    const int64_t off = sl.offset(d);
    if (off < 0 || off > full->dim_size(d) || shape.dim_size(d) > full->dim_size(d) - off) {
      return Damaged(
          path, absl::StrCat(who, " is a slice ", shape.DebugString(), " at offset ", absl::StrJoin(sl.offset(), ","),
                             " that lies outside '", sl.full_name(), "' ", full->DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEntry(const proto::CheckpointEntry& e, uint64_t payload_size, const std::string& path) {
  if (e.name().empty()) return Damaged(path, "an entry has no name");
  const std::string who = absl::StrCat("entry '", e.name(), "'");
  if (!IsValidDataType(e.dtype()) || e.dtype() == proto::DT_STRING) {
    return Damaged(path, absl::StrCat(who, " has unsupported dtype ", static_cast<int>(e.dtype())));
  }
  if (e.shape().unknown_rank()) return Damaged(path, absl::StrCat(who, " has a shape of unknown rank"));
  std::vector<int64_t> dims(e.shape().dim().begin(), e.shape().dim().end());
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok()) return Damaged(path, absl::StrCat(who, ": ", shape.status().message()));
  const uint64_t elem = DataTypeSize(static_cast<DataType>(e.dtype()));
  const uint64_t n = static_cast<uint64_t>(shape->num_elements());
  if (elem != 0 && n > std::numeric_limits<uint64_t>::max() / elem) {
    return Damaged(path, absl::StrCat(who, " is too large"));
  }
  if (e.size() < 0 || static_cast<uint64_t>(e.size()) != n * elem) {
    return Damaged(path, absl::StrCat(who, " has ", e.size(), " bytes but ", EntryTypeString(e), " needs ", n * elem));
  }
  if (e.has_slice()) {
    if (absl::Status s = CheckSlice(e, *shape, who, path); !s.ok()) return s;
  }
  if (e.offset() < 0 || static_cast<uint64_t>(e.offset()) > payload_size ||
      static_cast<uint64_t>(e.size()) > payload_size - static_cast<uint64_t>(e.offset())) {
    return Damaged(path, absl::StrCat(who, " lies outside the file's ", payload_size, " data bytes (offset ",
                                      e.offset(), ", ", e.size(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckUniqueNames(const google::protobuf::RepeatedPtrField<proto::CheckpointEntry>& entries,
                              const std::string& path) {
  absl::flat_hash_set<std::string> seen;
  for (const proto::CheckpointEntry& e : entries) {
    if (!seen.insert(e.name()).second) return Damaged(path, absl::StrCat("entry '", e.name(), "' appears twice"));
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  // ISA-L's crc32_iscsi takes an int length and works on the uninverted CRC.
  uint32_t crc = 0xffffffffu;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t left = data.size();
  while (left > 0) {
    int n = static_cast<int>(std::min<size_t>(left, size_t{1} << 30));
    crc = crc32_iscsi(const_cast<unsigned char*>(p), n, crc);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return ~crc;
}

std::string DataFileName(absl::string_view prefix, int shard, int num_shards) {
  return absl::StrFormat("%s.data-%05d-of-%05d", prefix, shard, num_shards);
}

std::string IndexFileName(absl::string_view prefix) { return absl::StrCat(prefix, ".index"); }

std::string EntryTypeString(const proto::CheckpointEntry& e) {
  std::string dtype = IsValidDataType(e.dtype()) ? DataTypeName(static_cast<DataType>(e.dtype()))
                                                 : absl::StrCat("dtype#", static_cast<int>(e.dtype()));
  if (e.shape().unknown_rank()) return absl::StrCat(dtype, "[?]");
  return absl::StrCat(dtype, "[", absl::StrJoin(e.shape().dim(), ","), "]");
}

std::vector<absl::string_view> EncodedShard::Pieces() const {
  std::vector<absl::string_view> all = payload;
  all.push_back(trailer);
  return all;
}

absl::StatusOr<EncodedShard> EncodeShardPieces(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                               proto::CheckpointShardFooter* footer) {
  for (const auto& [name, t] : tensors) {
    if (t.dtype() == DT_STRING) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cannot checkpoint variable '", name, "': string variables are not supported in checkpoints"));
    }
  }
  EncodedShard out;
  footer->Clear();
  int64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    absl::string_view bytes(static_cast<const char*>(t.raw_data()), t.TotalBytes());
    proto::CheckpointEntry* e = footer->add_entry();
    e->set_name(name);
    e->set_dtype(static_cast<proto::DataType>(t.dtype()));
    for (int i = 0; i < t.dims(); ++i) e->mutable_shape()->add_dim(t.dim_size(i));
    e->set_offset(offset);
    e->set_size(static_cast<int64_t>(bytes.size()));
    e->set_crc32c(Crc32c(bytes));
    offset += static_cast<int64_t>(bytes.size());
    if (!bytes.empty()) out.payload.push_back(bytes);  // an empty tensor's data may be null
  }
  AppendFooter(*footer, &out.trailer);
  return out;
}

absl::StatusOr<std::string> EncodeShard(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        proto::CheckpointShardFooter* footer) {
  ASSIGN_OR_RETURN(EncodedShard pieces, EncodeShardPieces(tensors, footer));
  return absl::StrJoin(pieces.Pieces(), "");
}

absl::StatusOr<ParsedShard> ParseShard(absl::string_view contents, const std::string& path) {
  ParsedShard shard;
  shard.path = path;
  absl::string_view footer;
  if (absl::Status s = SplitFile(contents, path, &shard.payload, &footer); !s.ok()) return s;
  if (!shard.footer.ParseFromArray(footer.data(), static_cast<int>(footer.size()))) {
    return Damaged(path, "its footer does not parse");
  }
  for (const proto::CheckpointEntry& e : shard.footer.entry()) {
    if (absl::Status s = CheckEntry(e, shard.payload.size(), path); !s.ok()) return s;
  }
  if (absl::Status s = CheckUniqueNames(shard.footer.entry(), path); !s.ok()) return s;
  return shard;
}

absl::StatusOr<Tensor> ReadTensor(const ParsedShard& shard, const proto::CheckpointEntry& e) {
  if (absl::Status s = CheckEntry(e, shard.payload.size(), shard.path); !s.ok()) return s;
  absl::string_view bytes = shard.payload.substr(static_cast<size_t>(e.offset()), static_cast<size_t>(e.size()));
  if (Crc32c(bytes) != e.crc32c()) {
    return Damaged(shard.path, absl::StrCat("the bytes of '", e.name(), "' do not match their crc32c"));
  }
  std::vector<int64_t> dims(e.shape().dim().begin(), e.shape().dim().end());
  ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(static_cast<DataType>(e.dtype()), shape));
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

std::string FrameFooter(const google::protobuf::MessageLite& footer) {
  std::string out;
  AppendFooter(footer, &out);
  return out;
}

std::string EncodeIndex(const proto::CheckpointIndex& index) { return FrameFooter(index); }

absl::StatusOr<proto::CheckpointIndex> ParseIndex(absl::string_view contents, const std::string& path) {
  absl::string_view payload, footer;
  if (absl::Status s = SplitFile(contents, path, &payload, &footer); !s.ok()) return s;
  if (!payload.empty()) return Damaged(path, "an index holds no data before its footer");
  proto::CheckpointIndex index;
  if (!index.ParseFromArray(footer.data(), static_cast<int>(footer.size()))) {
    return Damaged(path, "the index does not parse");
  }
  if (index.format_version() != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("Checkpoint index '", path, "' has format version ",
                                                      index.format_version(), "; this build reads version ",
                                                      kFormatVersion));
  }
  if (index.num_shards() < 1 || index.num_shards() > kMaxShards) {
    return Damaged(path, absl::StrCat("it names ", index.num_shards(), " shards"));
  }
  for (const proto::CheckpointEntry& e : index.entry()) {
    if (e.shard() < 0 || e.shard() >= index.num_shards()) {
      return Damaged(path, absl::StrCat("entry '", e.name(), "' is in shard ", e.shard(), " of ", index.num_shards()));
    }
    if (absl::Status s = CheckEntry(e, std::numeric_limits<int64_t>::max(), path); !s.ok()) return s;
  }
  if (absl::Status s = CheckUniqueNames(index.entry(), path); !s.ok()) return s;
  return index;
}

absl::Status CopyBlock(const char* src, absl::Span<const int64_t> src_dims, absl::Span<const int64_t> src_begin,
                       char* dst, absl::Span<const int64_t> dst_dims, absl::Span<const int64_t> dst_begin,
                       absl::Span<const int64_t> size, size_t elem_bytes) {
  const size_t rank = size.size();
  if (src_dims.size() != rank || src_begin.size() != rank || dst_dims.size() != rank || dst_begin.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("a block of rank ", rank, " copied between tensors of rank ",
                                                   src_dims.size(), " and ", dst_dims.size()));
  }
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (size[d] < 0 || src_begin[d] < 0 || dst_begin[d] < 0 || src_begin[d] > src_dims[d] ||
        size[d] > src_dims[d] - src_begin[d] || dst_begin[d] > dst_dims[d] || size[d] > dst_dims[d] - dst_begin[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the block [", absl::StrJoin(size, ","), "] from [", absl::StrJoin(src_begin, ","), "] of [",
                       absl::StrJoin(src_dims, ","), "] to [", absl::StrJoin(dst_begin, ","), "] of [",
                       absl::StrJoin(dst_dims, ","), "] lies outside a tensor"));
    }
    count *= size[d];
  }
  if (count == 0) return absl::OkStatus();
  if (rank == 0) {
    std::memcpy(dst, src, elem_bytes);
    return absl::OkStatus();
  }
  // Row-major strides, in elements.
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_dims[d];
    dst_stride[d - 1] = dst_stride[d] * dst_dims[d];
  }
  const size_t run = static_cast<size_t>(size[rank - 1]) * elem_bytes;  // contiguous in both
  std::vector<int64_t> index(rank, 0);                                  // within the block, last dim fixed at 0
  const int64_t rows = count / size[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      s += (src_begin[d] + index[d]) * src_stride[d];
      t += (dst_begin[d] + index[d]) * dst_stride[d];
    }
    std::memcpy(dst + static_cast<size_t>(t) * elem_bytes, src + static_cast<size_t>(s) * elem_bytes, run);
    for (size_t d = rank - 1; d-- > 0;) {  // next row: odometer over the leading dims
      if (++index[d] < size[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace distflow::checkpoint
