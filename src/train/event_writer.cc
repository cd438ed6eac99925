#include "distflow/train/event_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"
#include "tensor/checkpoint_format.h"

namespace distflow {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

void PutLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view data) {
  uint32_t crc = checkpoint::Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

struct EventWriter::Rep {
  std::string logdir, path;
  EventWriterOptions options;
  absl::Mutex mu;
  FILE* file ABSL_GUARDED_BY(mu) = nullptr;
  int pending ABSL_GUARDED_BY(mu) = 0;
  absl::Time last_flush ABSL_GUARDED_BY(mu);

  absl::Time Now() const { return absl::FromUnixMicros(options.env->NowMicros()); }
  double NowSeconds() const { return absl::ToDoubleSeconds(Now() - absl::UnixEpoch()); }

  ~Rep() {
    absl::MutexLock lock(&mu);
    if (file != nullptr) std::fclose(file);
  }

  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (file == nullptr) return absl::OkStatus();
    pending = 0;
    last_flush = Now();
    if (std::fflush(file) != 0) {
      return absl::InternalError(absl::StrCat("Cannot write event file '", path, "': ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

  absl::Status Append(absl::string_view data) {
    std::string header;
    PutLittleEndian(&header, data.size(), 8);
    PutLittleEndian(&header, MaskedCrc32c(header), 4);
    std::string footer;
    PutLittleEndian(&footer, MaskedCrc32c(data), 4);
    absl::MutexLock lock(&mu);
    if (file == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("Event file '", path, "' is closed"));
    }
    if (std::fwrite(header.data(), 1, header.size(), file) != header.size() ||
        std::fwrite(data.data(), 1, data.size(), file) != data.size() ||
        std::fwrite(footer.data(), 1, footer.size(), file) != footer.size()) {
      return absl::InternalError(absl::StrCat("Cannot write event file '", path, "': ", std::strerror(errno)));
    }
    if (++pending >= options.max_queue || Now() - last_flush >= options.flush_every) return FlushLocked();
    return absl::OkStatus();
  }

  absl::Status AppendEvent(const tensorboard::Event& e) { return Append(e.SerializeAsString()); }
};

EventWriter::EventWriter(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

EventWriter::~EventWriter() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Open(const std::string& logdir, EventWriterOptions options) {
  if (logdir.empty()) return absl::InvalidArgumentError("An event file needs a log directory; got ''");
  struct stat st;
  if (::stat(logdir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot write events to '", logdir, "': it exists and is not a directory"));
  }
  if (absl::Status s = Env::Default()->CreateDir(logdir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("Cannot create the log directory '", logdir, "': ", s.message()));
  }
  auto rep = std::make_unique<Rep>();
  rep->logdir = logdir;
  rep->options = options;
  if (rep->options.max_queue < 1) rep->options.max_queue = 1;
  if (rep->options.env == nullptr) rep->options.env = Env::Default();
  const double now = rep->NowSeconds();
  const std::string base = absl::StrCat(logdir, "/events.out.tfevents.", static_cast<int64_t>(now), ".", HostName(),
                                        options.filename_suffix);
  // A second writer in the same directory and second gets its own file.
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    rep->path = attempt == 0 ? base : absl::StrCat(base, ".", attempt);
    fd = ::open(rep->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("Cannot create event file '", rep->path, "' in '", logdir, "': ", std::strerror(errno)));
  }
  {
    absl::MutexLock lock(&rep->mu);
    rep->file = fdopen(fd, "wb");
    if (rep->file == nullptr) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("Cannot open event file '", rep->path, "': ", std::strerror(errno)));
    }
    rep->last_flush = rep->Now();
  }
  tensorboard::Event first;
  first.set_wall_time(now);
  first.set_file_version("brain.Event:2");
  RETURN_IF_ERROR(rep->AppendEvent(first));
  {
    absl::MutexLock lock(&rep->mu);
    RETURN_IF_ERROR(rep->FlushLocked());
  }
  return std::unique_ptr<EventWriter>(new EventWriter(std::move(rep)));
}

const std::string& EventWriter::path() const { return rep_->path; }
const std::string& EventWriter::logdir() const { return rep_->logdir; }

double EventWriter::Now() {
  return absl::ToDoubleSeconds(absl::FromUnixMicros(Env::Default()->NowMicros()) - absl::UnixEpoch());
}

absl::Status EventWriter::WriteEvent(absl::string_view serialized_event) {
  tensorboard::Event e;
  if (!e.ParseFromArray(serialized_event.data(), static_cast<int>(serialized_event.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot write to '", rep_->path, "': the bytes given are not a serialized Event"));
  }
  return rep_->Append(serialized_event);
}

absl::Status EventWriter::WriteSummary(int64_t step, absl::string_view serialized_summary, double wall_time) {
  tensorboard::Event e;
  e.set_wall_time(wall_time < 0 ? rep_->NowSeconds() : wall_time);
  e.set_step(step);
  if (!e.mutable_summary()->ParseFromArray(serialized_summary.data(), static_cast<int>(serialized_summary.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot write to '", rep_->path, "': the bytes given are not a serialized Summary"));
  }
  return rep_->AppendEvent(e);
}

absl::Status EventWriter::WriteScalar(int64_t step, const std::string& tag, float value, double wall_time) {
  tensorboard::Event e;
  e.set_wall_time(wall_time < 0 ? rep_->NowSeconds() : wall_time);
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return rep_->AppendEvent(e);
}

absl::Status EventWriter::WriteGraph(const Scope& scope, int64_t step) {
  proto::GraphDef graph;
  scope.ToGraphDef(&graph);
  tensorboard::Event e;
  e.set_wall_time(rep_->NowSeconds());
  e.set_step(step);
  e.set_graph_def(graph.SerializeAsString());
  return rep_->AppendEvent(e);
}

absl::Status EventWriter::WriteRunMetadata(int64_t step, const std::string& tag, absl::string_view run_metadata) {
  tensorboard::Event e;
  e.set_wall_time(rep_->NowSeconds());
  e.set_step(step);
  e.mutable_tagged_run_metadata()->set_tag(tag);
  e.mutable_tagged_run_metadata()->set_run_metadata(std::string(run_metadata));
  return rep_->AppendEvent(e);
}

absl::Status EventWriter::Flush() {
  absl::MutexLock lock(&rep_->mu);
  return rep_->FlushLocked();
}

absl::Status EventWriter::Close() {
  absl::MutexLock lock(&rep_->mu);
  if (rep_->file == nullptr) return absl::OkStatus();
  absl::Status s = rep_->FlushLocked();
  if (std::fclose(rep_->file) != 0 && s.ok()) {
    s = absl::InternalError(absl::StrCat("Cannot close event file '", rep_->path, "': ", std::strerror(errno)));
  }
  rep_->file = nullptr;
  return s;
}

}  // namespace distflow
