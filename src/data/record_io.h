// TFRecord files, byte for byte as TensorFlow writes them, so that files
// written by TensorFlow's tf.python_io.TFRecordWriter are read here and the
// other way round. Each record is
//
//   uint64 length, uint32 masked crc32c(length), bytes data, uint32 masked crc32c(data)
//
// little-endian, with TensorFlow's crc mask ((crc >> 15 | crc << 17) +
// 0xa282ead8). A file may be compressed as a whole: "ZLIB" (zlib stream)
// or "GZIP" (gzip stream), as TFRecordOptions names them.
//
// The reader distrusts the file as it would a network message: a length that
// runs past the end of the file, a header cut short or a crc that does not
// match is a DataLoss error naming the file and the byte offset of the
// record (in the uncompressed stream, for a compressed file); a clean end of
// file is OutOfRange. The byte sources under the reader are shared with the
// fixed-length and text-line readers.
//
// RecordWriter, RecordReader and ByteSource are not thread-safe: one owner,
// or the owner's lock, at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distflow::record_io {

enum class Compression { kNone, kZlib, kGzip };

// "" or "NONE", "ZLIB", "GZIP" (TensorFlow's spellings); InvalidArgument otherwise.
absl::StatusOr<Compression> ParseCompression(absl::string_view name);

// TensorFlow's masked CRC-32C.
uint32_t MaskedCrc32c(absl::string_view data);

// One record framed, as it lies in an uncompressed file.
std::string EncodeRecord(absl::string_view data);

// Bytes of a file read in order, decompressed if the file is.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path, Compression compression);
  // Up to `n` bytes into `dst`; fewer only at the end of the stream. Errors
  // (an unreadable file, a broken compressed stream) name the file.
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;
  // Bytes returned so far.
  virtual uint64_t offset() const = 0;
  virtual const std::string& path() const = 0;
};

class RecordWriter {
 public:
  // Creates (or truncates) `path`.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Open(const std::string& path,
                                                            Compression compression = Compression::kNone);
  ~RecordWriter();
  absl::Status Write(absl::string_view record);
  absl::Status Flush();
  // Finishes the compressed stream and closes the file; later writes fail.
  absl::Status Close();

  struct Rep;

 private:
  explicit RecordWriter(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

class RecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path,
                                                            Compression compression = Compression::kNone);
  explicit RecordReader(std::unique_ptr<ByteSource> source) : source_(std::move(source)) {}
  // The next record into `*record`. OutOfRange at the end of the file,
  // DataLoss (naming the file and offset) for a damaged record.
  absl::Status ReadRecord(std::string* record);
  // Offset of the next record.
  uint64_t offset() const { return source_->offset(); }
  const std::string& path() const { return source_->path(); }

 private:
  std::unique_ptr<ByteSource> source_;
};

}  // namespace distflow::record_io
