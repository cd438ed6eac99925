#include "base/logging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace distflow {
namespace {

LogSeverity SeverityFromEnv() {
  const char* v = std::getenv("DISTFLOW_LOG_LEVEL");
  if (v == nullptr) return LogSeverity::kInfo;
  absl::string_view s(v);
  if (s == "DEBUG") return LogSeverity::kDebug;
  if (s == "WARNING") return LogSeverity::kWarning;
  if (s == "ERROR") return LogSeverity::kError;
  return LogSeverity::kInfo;
}

std::atomic<int>& MinSeverity() {
  static std::atomic<int> s{static_cast<int>(SeverityFromEnv())};
  return s;
}

absl::Mutex prefix_mu(absl::kConstInit);
std::string* prefix ABSL_GUARDED_BY(prefix_mu) = nullptr;

char SeverityChar(LogSeverity s) {
  switch (s) {
    case LogSeverity::kDebug:
      return 'D';
    case LogSeverity::kInfo:
      return 'I';
    case LogSeverity::kWarning:
      return 'W';
    case LogSeverity::kError:
      return 'E';
    case LogSeverity::kFatal:
      return 'F';
  }
  return '?';
}

}  // namespace

void SetMinLogSeverity(LogSeverity severity) { MinSeverity() = static_cast<int>(severity); }
LogSeverity MinLogSeverity() { return static_cast<LogSeverity>(MinSeverity().load()); }

void SetLogPrefix(std::string p) {
  absl::MutexLock lock(&prefix_mu);
  delete prefix;
  prefix = new std::string(std::move(p));
}

namespace internal {

bool ShouldLog(LogSeverity severity) {
  return static_cast<int>(severity) >= MinSeverity().load(std::memory_order_relaxed);
}

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() {
  const char* base = std::strrchr(file_, '/');
  base = base ? base + 1 : file_;
  std::string head = absl::FormatTime("%m%d %H:%M:%E6S", absl::Now(), absl::LocalTimeZone());
  std::string line;
  line.reserve(128);
  line += SeverityChar(severity_);
  line += head;
  line += ' ';
  line += std::to_string(static_cast<long>(::syscall(SYS_gettid)));
  {
    absl::MutexLock lock(&prefix_mu);
    if (prefix != nullptr && !prefix->empty()) {
      line += ' ';
      line += *prefix;
    }
  }
  line += ' ';
  line += base;
  line += ':';
  line += std::to_string(line_);
  line += "] ";
  line += stream_.str();
  line += '\n';
  // One write keeps lines from different threads and processes whole.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
  if (severity_ == LogSeverity::kFatal) std::abort();
}

}  // namespace internal
}  // namespace distflow
