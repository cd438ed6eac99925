// Env: the seam through which distflow reaches the operating system's clock,
// files and ports, so that tests can substitute a fault-injecting one (the
// pattern of leveldb's Env).
//
// Env::Default() returns the process-wide POSIX implementation, which lives for
// the whole process. Implementations must be thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace distflow {

class Env {
 public:
  virtual ~Env() = default;

  static Env* Default();

  // Clock.
  virtual int64_t NowMicros() = 0;
  virtual void SleepForMicros(int64_t micros) = 0;

  // Files. Errors name the path and the OS reason.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Writes `pieces`, one after another, to a temporary file beside `path`,
  // fsyncs it and renames it over `path`, so readers see either the old or
  // the new file, never half.
  virtual absl::Status WriteFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces) = 0;
  absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
    return WriteFileAtomically(path, absl::MakeConstSpan(&contents, 1));
  }
  virtual bool FileExists(const std::string& path) = 0;
  virtual absl::Status CreateDir(const std::string& path) = 0;  // like mkdir -p
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;

  // Ports: a TCP port on 127.0.0.1 that was free when asked.
  virtual absl::StatusOr<int> PickUnusedPort() = 0;
};

// Forwards every call to another Env; subclass it to override a few calls in tests.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  int64_t NowMicros() override { return target_->NowMicros(); }
  void SleepForMicros(int64_t micros) override { target_->SleepForMicros(micros); }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  using Env::WriteFileAtomically;
  absl::Status WriteFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces) override {
    return target_->WriteFileAtomically(path, pieces);
  }
  bool FileExists(const std::string& path) override { return target_->FileExists(path); }
  absl::Status CreateDir(const std::string& path) override { return target_->CreateDir(path); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override { return target_->ListDir(path); }
  absl::Status DeleteFile(const std::string& path) override { return target_->DeleteFile(path); }
  absl::StatusOr<int> PickUnusedPort() override { return target_->PickUnusedPort(); }

 protected:
  Env* target() const { return target_; }

 private:
  Env* target_;
};

}  // namespace distflow
