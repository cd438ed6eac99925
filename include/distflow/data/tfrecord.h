// TFRecord files for programs and the Python client (tf.python_io): a
// writer and an iterator over the records of a file, byte for byte as
// TensorFlow writes them, uncompressed or "ZLIB" / "GZIP" compressed. A
// damaged record (crc mismatch, truncation) is DataLoss naming the file and
// the record's byte offset. Neither class is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distflow/export.h"

namespace distflow {
namespace data {

class DISTFLOW_EXPORT TFRecordWriter {
 public:
  // `compression`: "", "NONE", "ZLIB" or "GZIP". Creates or truncates `path`.
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Open(const std::string& path,
                                                              const std::string& compression = "");
  ~TFRecordWriter();
  absl::Status Write(absl::string_view record);
  absl::Status Flush();
  absl::Status Close();

  struct Rep;

 private:
  explicit TFRecordWriter(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

class DISTFLOW_EXPORT TFRecordIterator {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordIterator>> Open(const std::string& path,
                                                                const std::string& compression = "");
  ~TFRecordIterator();
  // The next record; OutOfRange after the last.
  absl::Status Next(std::string* record);

  struct Rep;

 private:
  explicit TFRecordIterator(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace data
}  // namespace distflow
