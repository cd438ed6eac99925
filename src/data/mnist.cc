#include "distflow/data/mnist.h"

#include <zlib.h>

#include <algorithm>
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

absl::StatusOr<Tensor> ParseIdxImages(const std::string& b, const std::string& name) {
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
  Tensor t(DT_FLOAT, TensorShape({n, rows * cols}));
  auto f = t.flat<float>();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data()) + 16;
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(p[i]) / 255.f;
  return t;
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

absl::StatusOr<DataSets> ReadDataSets(const std::string& dir, int64_t validation_size, uint64_t seed) {
  const std::string hint =
      dir == kDefaultFashionMnistDir ? " (install it with: apt-get install dataset-fashion-mnist)" : "";
  auto load = [&](const std::string& stem, bool images) -> absl::StatusOr<Tensor> {
    std::string path = Resolve(dir, stem);
    if (!Env::Default()->FileExists(path)) {
      return absl::NotFoundError(absl::StrCat("Data file '", path, "' (or without .gz) does not exist", hint));
    }
    absl::StatusOr<Tensor> t = images ? ReadIdxImages(path) : ReadIdxLabels(path);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(t.status().message(), hint));
    return t;
  };
  ASSIGN_OR_RETURN(Tensor tx, load("train-images-idx3-ubyte", true));
  ASSIGN_OR_RETURN(Tensor ty, load("train-labels-idx1-ubyte", false));
  ASSIGN_OR_RETURN(Tensor sx, load("t10k-images-idx3-ubyte", true));
  ASSIGN_OR_RETURN(Tensor sy, load("t10k-labels-idx1-ubyte", false));
  if (tx.dim_size(0) != ty.dim_size(0) || sx.dim_size(0) != sy.dim_size(0)) {
    return absl::DataLossError(absl::StrCat("Image and label counts differ in '", dir, "'"));
  }
  if (validation_size < 0 || validation_size >= tx.dim_size(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation_size ", validation_size, " must be in [0, ", tx.dim_size(0), ")"));
  }
  int64_t n = tx.dim_size(0) - validation_size;
  DataSets out;
  out.train = DataSet(tx.Slice(0, n), ty.Slice(0, n), seed);
  out.validation = DataSet(tx.Slice(n, tx.dim_size(0)), ty.Slice(n, ty.dim_size(0)), seed + 1);
  out.test = DataSet(sx, sy, seed + 2);
  return out;
}

}  // namespace data
}  // namespace distflow
