// The public TFRecord classes (distflow/data/tfrecord.h) over record_io.
#include "distflow/data/tfrecord.h"

#include "base/status_macros.h"
#include "data/record_io.h"

namespace distflow {
namespace data {

struct TFRecordWriter::Rep {
  std::unique_ptr<record_io::RecordWriter> writer;
};

TFRecordWriter::TFRecordWriter(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
TFRecordWriter::~TFRecordWriter() = default;

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Open(const std::string& path,
                                                                     const std::string& compression) {
  ASSIGN_OR_RETURN(record_io::Compression c, record_io::ParseCompression(compression));
  auto rep = std::make_unique<Rep>();
  ASSIGN_OR_RETURN(rep->writer, record_io::RecordWriter::Open(path, c));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(rep)));
}
absl::Status TFRecordWriter::Write(absl::string_view record) { return rep_->writer->Write(record); }
absl::Status TFRecordWriter::Flush() { return rep_->writer->Flush(); }
absl::Status TFRecordWriter::Close() { return rep_->writer->Close(); }

struct TFRecordIterator::Rep {
  std::unique_ptr<record_io::RecordReader> reader;
};

TFRecordIterator::TFRecordIterator(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
TFRecordIterator::~TFRecordIterator() = default;

absl::StatusOr<std::unique_ptr<TFRecordIterator>> TFRecordIterator::Open(const std::string& path,
                                                                         const std::string& compression) {
  ASSIGN_OR_RETURN(record_io::Compression c, record_io::ParseCompression(compression));
  auto rep = std::make_unique<Rep>();
  ASSIGN_OR_RETURN(rep->reader, record_io::RecordReader::Open(path, c));
  return std::unique_ptr<TFRecordIterator>(new TFRecordIterator(std::move(rep)));
}
absl::Status TFRecordIterator::Next(std::string* record) { return rep_->reader->ReadRecord(record); }

}  // namespace data
}  // namespace distflow
