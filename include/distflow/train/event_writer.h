// EventWriter: a TensorBoard event file, events.out.tfevents.<unix time>.
// <hostname><suffix> in a log directory (created if missing), that
// TensorBoard reads as it reads TensorFlow's.
//
//   auto writer = EventWriter::Open("train_logs").value();
//   writer->WriteGraph(root);                               // the model
//   writer->WriteSummary(step, summary_bytes);              // from sess.Run
//   writer->WriteScalar(step, "global_step/sec", 31.2f);
//   writer->Close();
//
// Format: TFRecord framing around serialized Events (proto/event.proto):
// each record is a little-endian uint64 length, the masked CRC-32C of those
// 8 bytes (uint32), the data, and the masked CRC-32C of the data, where
// mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The first record is
// Event{wall_time, file_version: "brain.Event:2"}. Summaries are the bytes a
// summary op outputs (a serialized Summary); graphs are distflow's own
// GraphDef (proto/graph.proto), which TensorBoard's graph plugin may not
// draw.
//
// Records are buffered: the file is flushed once max_queue records wait or
// flush_every has passed when a record is written, and on Flush, Close and
// destruction (there is no background thread, so a writer that stops
// writing keeps its last records until one of those).
//
// Thread-safe: one mutex orders the records of concurrent writers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

class Env;  // the clock (src/base/env.h)

struct DISTFLOW_EXPORT EventWriterOptions {
  // Appended to the file name (TensorFlow's filename_suffix).
  std::string filename_suffix;
  // Records buffered before a flush.
  int max_queue = 10;
  absl::Duration flush_every = absl::Seconds(120);
  // The clock of wall_time and of flush_every (a MonitoredSession passes its
  // own); null: Env::Default(). Must outlive the writer.
  Env* env = nullptr;
};

class DISTFLOW_EXPORT EventWriter {
 public:
  // Creates `logdir` if needed and a new event file in it, with its
  // file_version record. InvalidArgument or the OS's error naming the
  // directory if it cannot be (e.g. it is a file).
  static absl::StatusOr<std::unique_ptr<EventWriter>> Open(const std::string& logdir, EventWriterOptions options = {});
  ~EventWriter();  // closes, ignoring errors (call Close to see them)
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  const std::string& path() const;
  const std::string& logdir() const;

  // A serialized Event, written as it is. InvalidArgument if it does not parse.
  absl::Status WriteEvent(absl::string_view serialized_event);
  // Event{wall_time, step, summary}; `serialized_summary` is a summary op's
  // output. wall_time < 0: now.
  absl::Status WriteSummary(int64_t step, absl::string_view serialized_summary, double wall_time = -1);
  // A one-value summary {tag: simple_value}.
  absl::Status WriteScalar(int64_t step, const std::string& tag, float value, double wall_time = -1);
  // Event{graph_def} of the scope's graph as it is now.
  absl::Status WriteGraph(const Scope& scope, int64_t step = 0);
  // Event{tagged_run_metadata{tag, run_metadata}}.
  absl::Status WriteRunMetadata(int64_t step, const std::string& tag, absl::string_view run_metadata);

  absl::Status Flush();
  // Flushes and closes the file; later writes are FailedPrecondition.
  // Closing twice is fine.
  absl::Status Close();

  // Seconds since the Unix epoch, as Events' wall_time, on Env::Default()'s
  // clock (a writer stamps its events with its options' env).
  static double Now();

 private:
  struct Rep;
  explicit EventWriter(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

// The masked CRC-32C of a TFRecord (see above); for readers and tests.
DISTFLOW_EXPORT uint32_t MaskedCrc32c(absl::string_view data);

}  // namespace distflow
