#include "data/record_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/checkpoint_format.h"

namespace distflow::record_io {
namespace {

constexpr size_t kHeaderBytes = 12;  // length, crc of length
constexpr size_t kFooterBytes = 4;   // crc of data
constexpr size_t kChunk = 256 << 10;
// A record longer than this is taken for a damaged length, not allocated.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 34;

void PutLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string OsError(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " '", path, "': ", std::strerror(errno));
}

class FileSource : public ByteSource {
 public:
  FileSource(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}
  ~FileSource() override { std::fclose(file_); }
  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, file_);
    if (got < n && std::ferror(file_)) return absl::DataLossError(OsError("Cannot read", path_));
    offset_ += got;
    return got;
  }
  uint64_t offset() const override { return offset_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  FILE* file_;
  uint64_t offset_ = 0;
};

class InflateSource : public ByteSource {
 public:
  InflateSource(std::unique_ptr<FileSource> file, Compression c) : file_(std::move(file)), in_(kChunk) {
    std::memset(&z_, 0, sizeof(z_));
    // 15 bits of window; +16 reads a gzip header and trailer instead of zlib's.
    ok_ = inflateInit2(&z_, c == Compression::kGzip ? 15 + 16 : 15) == Z_OK;
  }
  ~InflateSource() override {
    if (ok_) inflateEnd(&z_);
  }
  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    if (!ok_) return absl::InternalError(absl::StrCat("Cannot start zlib to read '", path(), "'"));
    size_t done = 0;
    while (done < n && !finished_) {
      if (z_.avail_in == 0) {
        ASSIGN_OR_RETURN(size_t got, file_->Read(in_.data(), in_.size()));
        if (got == 0) {
          if (started_) {
            return absl::DataLossError(absl::StrCat("Compressed file '", path(),
                                                    "' ends in the middle of its stream (at ", offset_ + done,
                                                    " uncompressed bytes)"));
          }
          break;  // an empty file holds no records
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(got);
      }
      started_ = true;
      z_.next_out = reinterpret_cast<Bytef*>(dst + done);
      z_.avail_out = static_cast<uInt>(n - done);
      int rc = inflate(&z_, Z_NO_FLUSH);
      done = n - z_.avail_out;
      if (rc == Z_STREAM_END) {
        finished_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::DataLossError(absl::StrCat("Compressed file '", path(), "' is damaged near uncompressed byte ",
                                                offset_ + done, ": zlib says ", z_.msg ? z_.msg : "error ",
                                                z_.msg ? "" : std::to_string(rc)));
      }
    }
    offset_ += done;
    return done;
  }
  uint64_t offset() const override { return offset_; }
  const std::string& path() const override { return file_->path(); }

 private:
  std::unique_ptr<FileSource> file_;
  std::vector<char> in_;
  z_stream z_;
  bool ok_ = false, started_ = false, finished_ = false;
  uint64_t offset_ = 0;
};

// Reads exactly n bytes unless the stream ends; returns how many were read.
absl::StatusOr<size_t> ReadFully(ByteSource* src, char* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    ASSIGN_OR_RETURN(size_t got, src->Read(dst + done, n - done));
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

absl::StatusOr<Compression> ParseCompression(absl::string_view name) {
  if (name.empty() || name == "NONE") return Compression::kNone;
  if (name == "ZLIB") return Compression::kZlib;
  if (name == "GZIP") return Compression::kGzip;
  return absl::InvalidArgumentError(
      absl::StrCat("Unknown TFRecord compression '", name, "': expected '', 'NONE', 'ZLIB' or 'GZIP'"));
}

uint32_t MaskedCrc32c(absl::string_view data) {
  uint32_t crc = checkpoint::Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string EncodeRecord(absl::string_view data) {
  std::string out;
  out.reserve(kHeaderBytes + data.size() + kFooterBytes);
  PutLittleEndian(&out, data.size(), 8);
  PutLittleEndian(&out, MaskedCrc32c(out), 4);
  out.append(data.data(), data.size());
  PutLittleEndian(&out, MaskedCrc32c(data), 4);
  return out;
}

absl::StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path, Compression compression) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return errno == ENOENT ? absl::NotFoundError(OsError("Cannot open", path))
                           : absl::PermissionDeniedError(OsError("Cannot open", path));
  }
  auto file = std::make_unique<FileSource>(path, f);
  if (compression == Compression::kNone) return file;
  return std::make_unique<InflateSource>(std::move(file), compression);
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path, Compression compression) {
  ASSIGN_OR_RETURN(auto source, ByteSource::Open(path, compression));
  return std::make_unique<RecordReader>(std::move(source));
}

absl::Status RecordReader::ReadRecord(std::string* record) {
  const uint64_t start = source_->offset();
  auto where = [&] { return absl::StrCat("TFRecord file '", source_->path(), "' at byte offset ", start); };
  char header[kHeaderBytes];
  ASSIGN_OR_RETURN(size_t got, ReadFully(source_.get(), header, kHeaderBytes));
  if (got == 0) return absl::OutOfRangeError(absl::StrCat("End of TFRecord file '", source_->path(), "'"));
  if (got < kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("Truncated record in ", where(), ": the header needs ", kHeaderBytes,
                                            " bytes, the file has ", got));
  }
  if (MaskedCrc32c(absl::string_view(header, 8)) != GetLittleEndian(header + 8, 4)) {
    return absl::DataLossError(
        absl::StrCat("Corrupted record in ", where(), ": the crc32c of its length does not match"));
  }
  const uint64_t length = GetLittleEndian(header, 8);
  if (length > kMaxRecordBytes) {
    return absl::DataLossError(absl::StrCat("Corrupted record in ", where(), ": length ", length, " is implausible"));
  }
  record->resize(length + kFooterBytes);
  ASSIGN_OR_RETURN(got, ReadFully(source_.get(), record->data(), record->size()));
  if (got < record->size()) {
    return absl::DataLossError(absl::StrCat("Truncated record in ", where(), ": it holds ", length,
                                            " bytes of data and its crc, the file has ", got, " more"));
  }
  const uint32_t crc = static_cast<uint32_t>(GetLittleEndian(record->data() + length, 4));
  record->resize(length);
  if (MaskedCrc32c(*record) != crc) {
    return absl::DataLossError(
        absl::StrCat("Corrupted record in ", where(), ": the crc32c of its ", length, " data bytes does not match"));
  }
  return absl::OkStatus();
}

struct RecordWriter::Rep {
  std::string path;
  FILE* file = nullptr;
  Compression compression = Compression::kNone;
  z_stream z;
  std::vector<char> out = std::vector<char>(kChunk);

  absl::Status WriteRaw(const char* p, size_t n) {
    if (std::fwrite(p, 1, n, file) != n) return absl::InternalError(OsError("Cannot write", path));
    return absl::OkStatus();
  }
  absl::Status Deflate(absl::string_view data, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    do {
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      int rc = deflate(&z, flush);
      if (rc == Z_STREAM_ERROR) return absl::InternalError(absl::StrCat("zlib failed writing '", path, "'"));
      RETURN_IF_ERROR(WriteRaw(out.data(), out.size() - z.avail_out));
    } while (z.avail_out == 0 || z.avail_in > 0);
    return absl::OkStatus();
  }
  absl::Status Append(absl::string_view bytes) {
    if (file == nullptr) return absl::FailedPreconditionError(absl::StrCat("TFRecord file '", path, "' is closed"));
    if (compression == Compression::kNone) return WriteRaw(bytes.data(), bytes.size());
    return Deflate(bytes, Z_NO_FLUSH);
  }
};

RecordWriter::RecordWriter(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

RecordWriter::~RecordWriter() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path, Compression compression) {
  auto rep = std::make_unique<Rep>();
  rep->path = path;
  rep->compression = compression;
  if (compression != Compression::kNone) {
    std::memset(&rep->z, 0, sizeof(rep->z));
    if (deflateInit2(&rep->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, compression == Compression::kGzip ? 15 + 16 : 15, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      return absl::InternalError(absl::StrCat("Cannot start zlib to write '", path, "'"));
    }
  }
  rep->file = std::fopen(path.c_str(), "wb");
  if (rep->file == nullptr) {
    absl::Status s = absl::PermissionDeniedError(OsError("Cannot create TFRecord file", path));
    if (compression != Compression::kNone) deflateEnd(&rep->z);
    return s;
  }
  return std::unique_ptr<RecordWriter>(new RecordWriter(std::move(rep)));
}

absl::Status RecordWriter::Write(absl::string_view record) {
  std::string header;
  PutLittleEndian(&header, record.size(), 8);
  PutLittleEndian(&header, MaskedCrc32c(header), 4);
  std::string footer;
  PutLittleEndian(&footer, MaskedCrc32c(record), 4);
  RETURN_IF_ERROR(rep_->Append(header));
  RETURN_IF_ERROR(rep_->Append(record));
  return rep_->Append(footer);
}

absl::Status RecordWriter::Flush() {
  if (rep_->file == nullptr)
    return absl::FailedPreconditionError(absl::StrCat("TFRecord file '", rep_->path, "' is closed"));
  if (rep_->compression != Compression::kNone) RETURN_IF_ERROR(rep_->Deflate({}, Z_SYNC_FLUSH));
  if (std::fflush(rep_->file) != 0) return absl::InternalError(OsError("Cannot write", rep_->path));
  return absl::OkStatus();
}

absl::Status RecordWriter::Close() {
  if (rep_->file == nullptr) return absl::OkStatus();
  absl::Status s;
  if (rep_->compression != Compression::kNone) {
    s = rep_->Deflate({}, Z_FINISH);
    deflateEnd(&rep_->z);
  }
  if (std::fclose(rep_->file) != 0 && s.ok()) s = absl::InternalError(OsError("Cannot close", rep_->path));
  rep_->file = nullptr;
  return s;
}

}  // namespace distflow::record_io
