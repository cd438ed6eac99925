#include "distflow/data/mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/status_macros.h"

namespace distflow {
namespace data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr int64_t kMaxExamples = 10'000'000;

uint32_t BigEndian32(const std::string& b, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3]));
}

absl::StatusOr<std::string> ReadMaybeGzipped(const std::string& path) {
  if (!absl::EndsWith(path, ".gz")) return Env::Default()->ReadFile(path);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("Cannot open '", path, "'"));
  std::string out;
  // The size gzip recorded (its last 4 bytes, modulo 4 GiB), so the buffer
  // grows once instead of doubling through twice the file's size; only a hint.
  if (FILE* raw = std::fopen(path.c_str(), "rb"); raw != nullptr) {
    unsigned char isize[4];
    if (std::fseek(raw, -4, SEEK_END) == 0 && std::fread(isize, 1, 4, raw) == 4) {
      const uint32_t n = static_cast<uint32_t>(isize[0]) | (static_cast<uint32_t>(isize[1]) << 8) |
                         (static_cast<uint32_t>(isize[2]) << 16) | (static_cast<uint32_t>(isize[3]) << 24);
      out.reserve(std::min<size_t>(n, size_t{1} << 30));
    }
    std::fclose(raw);
  }
  char buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      return absl::DataLossError(absl::StrCat("Corrupt gzip file '", path, "': ", msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{1} << 32)) {
      gzclose(f);
      return absl::DataLossError(absl::StrCat("'", path, "' decompresses to more than 4 GiB"));
    }
  }
  gzclose(f);
  return out;
}

std::string Resolve(const std::string& dir, const std::string& stem) {
  std::string plain = absl::StrCat(dir, "/", stem);
  if (Env::Default()->FileExists(plain)) return plain;
  return plain + ".gz";
}

}  // namespace

namespace {

// Checks an IDX image header against the size of `b`; returns the image count and the pixels per image.
absl::StatusOr<std::pair<int64_t, int64_t>> CheckIdxImages(const std::string& b, const std::string& name) {
  if (b.size() < 16) return absl::DataLossError(absl::StrCat("'", name, "' is too short for an IDX image header"));
  if (BigEndian32(b, 0) != kImagesMagic) {
    return absl::DataLossError(
        absl::StrCat("'", name, "' is not an IDX image file (magic ", BigEndian32(b, 0), ", expected 2051)"));
  }
  int64_t n = BigEndian32(b, 4), rows = BigEndian32(b, 8), cols = BigEndian32(b, 12);
  if (n > kMaxExamples || rows == 0 || cols == 0 || rows > 1024 || cols > 1024) {
    return absl::DataLossError(absl::StrCat("'", name, "' has implausible dimensions ", n, "x", rows, "x", cols));
  }
  if (static_cast<int64_t>(b.size()) != 16 + n * rows * cols) {
    return absl::DataLossError(absl::StrCat("'", name, "' should hold ", n, " images of ", rows, "x", cols, " (",
                                            16 + n * rows * cols, " bytes) but has ", b.size(), " bytes"));
  }
  return std::make_pair(n, rows * cols);
}

// Images first, first + stride, ... (below `end`) of checked IDX bytes, as float32 in [0, 1].
Tensor ConvertImages(const std::string& b, int64_t width, int64_t first, int64_t end, int64_t stride) {
  const int64_t n = first < end ? (end - first + stride - 1) / stride : 0;
  Tensor t(DT_FLOAT, TensorShape({n, width}));
  float* out = t.flat<float>().data();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data()) + 16;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = p + (first + i * stride) * width;
    for (int64_t k = 0; k < width; ++k) out[i * width + k] = static_cast<float>(row[k]) / 255.f;
  }
  return t;
}

// Labels first, first + stride, ... (below `end`) of `all`.
Tensor SelectLabels(const Tensor& all, int64_t first, int64_t end, int64_t stride) {
  const int64_t n = first < end ? (end - first + stride - 1) / stride : 0;
  Tensor t(DT_INT32, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) {
    t.flat<int32_t>()[static_cast<size_t>(i)] = all.flat<int32_t>()[static_cast<size_t>(first + i * stride)];
  }
  return t;
}

}  // namespace

absl::StatusOr<Tensor> ParseIdxImages(const std::string& b, const std::string& name) {
  ASSIGN_OR_RETURN(auto dims, CheckIdxImages(b, name));
  return ConvertImages(b, dims.second, 0, dims.first, 1);
}

absl::StatusOr<Tensor> ParseIdxLabels(const std::string& b, const std::string& name) {
  if (b.size() < 8) return absl::DataLossError(absl::StrCat("'", name, "' is too short for an IDX label header"));
  if (BigEndian32(b, 0) != kLabelsMagic) {
    return absl::DataLossError(
        absl::StrCat("'", name, "' is not an IDX label file (magic ", BigEndian32(b, 0), ", expected 2049)"));
  }
  int64_t n = BigEndian32(b, 4);
  if (n > kMaxExamples || static_cast<int64_t>(b.size()) != 8 + n) {
    return absl::DataLossError(
        absl::StrCat("'", name, "' should hold ", n, " labels (", 8 + n, " bytes) but has ", b.size(), " bytes"));
  }
  Tensor t(DT_INT32, TensorShape({n}));
  auto f = t.flat<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = static_cast<uint8_t>(b[static_cast<size_t>(8 + i)]);
    if (v > 9) return absl::DataLossError(absl::StrCat("'", name, "': label ", i, " is ", int{v}, ", outside 0..9"));
    f[static_cast<size_t>(i)] = v;
  }
  return t;
}

absl::StatusOr<Tensor> ReadIdxImages(const std::string& path) {
  ASSIGN_OR_RETURN(std::string b, ReadMaybeGzipped(path));
  return ParseIdxImages(b, path);
}

absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path) {
  ASSIGN_OR_RETURN(std::string b, ReadMaybeGzipped(path));
  return ParseIdxLabels(b, path);
}

DataSet::DataSet(Tensor images, Tensor labels, uint64_t seed)
    : images_(std::move(images)), labels_(std::move(labels)), rng_(seed) {
  order_.resize(static_cast<size_t>(num_examples()));
  std::iota(order_.begin(), order_.end(), 0);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

std::pair<Tensor, Tensor> DataSet::NextBatch(int64_t n) {
  n = std::min(n, num_examples());
  const int64_t width = images_.dim_size(1);
  Tensor x(DT_FLOAT, TensorShape({n, width}));
  Tensor y(DT_INT32, TensorShape({n}));
  auto src = images_.flat<float>();
  auto lab = labels_.flat<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (pos_ >= num_examples()) {
      pos_ = 0;
      ++epochs_;
      std::shuffle(order_.begin(), order_.end(), rng_);
    }
    int64_t k = order_[static_cast<size_t>(pos_++)];
    std::copy_n(src.data() + k * width, width, x.flat<float>().data() + i * width);
    y.flat<int32_t>()[static_cast<size_t>(i)] = lab[static_cast<size_t>(k)];
  }
  return {x, y};
}

namespace {

std::string DataHint(const std::string& dir) {
  return dir == kDefaultFashionMnistDir ? " (install it with: apt-get install dataset-fashion-mnist)" : "";
}

// The bytes of one of the four files, gunzipped, or an error naming it.
absl::StatusOr<std::string> LoadIdxBytes(const std::string& dir, const std::string& stem, std::string* path) {
  *path = Resolve(dir, stem);
  if (!Env::Default()->FileExists(*path)) {
    return absl::NotFoundError(absl::StrCat("Data file '", *path, "' (or without .gz) does not exist", DataHint(dir)));
  }
  absl::StatusOr<std::string> b = ReadMaybeGzipped(*path);
  if (!b.ok()) return absl::Status(b.status().code(), absl::StrCat(b.status().message(), DataHint(dir)));
  return b;
}

absl::StatusOr<Tensor> LoadIdx(const std::string& dir, const std::string& stem, bool images) {
  std::string path;
  ASSIGN_OR_RETURN(std::string b, LoadIdxBytes(dir, stem, &path));
  absl::StatusOr<Tensor> t = images ? ParseIdxImages(b, path) : ParseIdxLabels(b, path);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(t.status().message(), DataHint(dir)));
  return t;
}

}  // namespace

absl::StatusOr<DataSets> ReadDataSets(const std::string& dir, int64_t validation_size, uint64_t seed) {
  ShardOptions o;
  o.validation_size = validation_size;
  o.seed = seed;
  return ReadDataSetShard(dir, o);
}

absl::StatusOr<DataSets> ReadDataSetShard(const std::string& dir, const ShardOptions& o) {
  if (o.num_shards < 1 || o.shard_index < 0 || o.shard_index >= o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", o.shard_index, " of ", o.num_shards,
                                                   ": the shard index must be in [0, num_shards) and num_shards >= 1"));
  }
  // The training images stay as bytes until only the shard's are converted.
  std::string path;
  ASSIGN_OR_RETURN(std::string tb, LoadIdxBytes(dir, "train-images-idx3-ubyte", &path));
  absl::StatusOr<std::pair<int64_t, int64_t>> dims = CheckIdxImages(tb, path);
  if (!dims.ok()) return absl::Status(dims.status().code(), absl::StrCat(dims.status().message(), DataHint(dir)));
  const auto [total, width] = *dims;
  ASSIGN_OR_RETURN(Tensor ty, LoadIdx(dir, "train-labels-idx1-ubyte", false));
  if (total != ty.dim_size(0)) {
    return absl::DataLossError(absl::StrCat("Image and label counts differ in '", dir, "': ", total,
                                            " training images, ", ty.dim_size(0), " labels"));
  }
  if (o.validation_size < 0 || o.validation_size >= total) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation_size ", o.validation_size, " must be in [0, ", total, ")"));
  }
  const int64_t n = total - o.validation_size;
  if (n < o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("cannot split ", n, " training examples into ", o.num_shards,
                                                   " shards: every shard needs at least one"));
  }
  DataSets out;
  out.train = DataSet(ConvertImages(tb, width, o.shard_index, n, o.num_shards),
                      SelectLabels(ty, o.shard_index, n, o.num_shards), o.seed);
  if (o.validation) {
    out.validation = DataSet(ConvertImages(tb, width, n, total, 1), ty.Slice(n, total), o.seed + 1);
  }
  tb = std::string();  // the whole file's bytes are no longer needed
  if (o.test) {
    ASSIGN_OR_RETURN(Tensor sx, LoadIdx(dir, "t10k-images-idx3-ubyte", true));
    ASSIGN_OR_RETURN(Tensor sy, LoadIdx(dir, "t10k-labels-idx1-ubyte", false));
    if (sx.dim_size(0) != sy.dim_size(0)) {
      return absl::DataLossError(absl::StrCat("Image and label counts differ in '", dir, "': ", sx.dim_size(0),
                                              " test images, ", sy.dim_size(0), " labels"));
    }
    out.test = DataSet(sx, sy, o.seed + 2);
  }
  return out;
}

}  // namespace data
}  // namespace distflow
