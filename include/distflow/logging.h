// Leveled logging to stderr with a per-process prefix, and DF_CHECK for
// broken invariants.
//
//   DF_LOG(INFO) << "listening on " << address;
//   DF_CHECK(ptr != nullptr) << "explanation";
//
// Every macro carries the DF_ prefix so that it cannot collide with a
// program's own LOG or CHECK (distflow's sources use the short names from
// base/logging.h, which is not installed).
//
// Every line reads `I1122 05:31:02.123456 12345 /job:ps/task:0 file.cc:42] msg`:
// severity, time, thread id, the process prefix (set once the task is known),
// and the source location. Thread-safe: a line is written with one write(2).
#pragma once

#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "distflow/export.h"

namespace distflow {

enum class LogSeverity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// The minimum severity that is printed; defaults to kInfo, or the value of the
// DISTFLOW_LOG_LEVEL environment variable (DEBUG, INFO, WARNING, ERROR).
DISTFLOW_EXPORT void SetMinLogSeverity(LogSeverity severity);
DISTFLOW_EXPORT LogSeverity MinLogSeverity();

// A prefix printed on every line, e.g. "/job:worker/task:1". Thread-safe.
DISTFLOW_EXPORT void SetLogPrefix(std::string prefix);

namespace internal {

class DISTFLOW_EXPORT LogMessage {
 public:
  LogMessage(const char* file, int line, LogSeverity severity);
  ~LogMessage();  // writes the line; aborts after a kFatal one
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Swallows the stream in a disabled LOG statement.
struct DISTFLOW_EXPORT LogVoidify {
  void operator&(std::ostream&) {}
};

DISTFLOW_EXPORT bool ShouldLog(LogSeverity severity);

}  // namespace internal
}  // namespace distflow

#define DF_LOG_SEVERITY_DEBUG ::distflow::LogSeverity::kDebug
#define DF_LOG_SEVERITY_INFO ::distflow::LogSeverity::kInfo
#define DF_LOG_SEVERITY_WARNING ::distflow::LogSeverity::kWarning
#define DF_LOG_SEVERITY_ERROR ::distflow::LogSeverity::kError
#define DF_LOG_SEVERITY_FATAL ::distflow::LogSeverity::kFatal

#define DF_LOG(severity)                                       \
  !::distflow::internal::ShouldLog(DF_LOG_SEVERITY_##severity) \
      ? (void)0                                                \
      : ::distflow::internal::LogVoidify() &                   \
            ::distflow::internal::LogMessage(__FILE__, __LINE__, DF_LOG_SEVERITY_##severity).stream()

#define DF_CHECK(condition)                                                                                        \
  (condition) ? (void)0                                                                                            \
              : ::distflow::internal::LogVoidify() &                                                               \
                    ::distflow::internal::LogMessage(__FILE__, __LINE__, ::distflow::LogSeverity::kFatal).stream() \
                        << "Check failed: " #condition " "

#define DF_CHECK_OK(expr)                                \
  do {                                                   \
    ::absl::Status df_check_status_ = (expr);            \
    DF_CHECK(df_check_status_.ok()) << df_check_status_; \
  } while (0)

#ifndef NDEBUG
#define DF_DCHECK(condition) DF_CHECK(condition)
#else
#define DF_DCHECK(condition) \
  while (false) DF_CHECK(condition)
#endif
