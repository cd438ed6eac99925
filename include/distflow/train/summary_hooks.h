// Hooks that write TensorBoard event files from a MonitoredSession, as
// TensorFlow 1.x's SummarySaverHook and StepCounterHook do. The chief's
// MonitoredSession adds both when it has a logdir (SupervisorOptions::
// summary_op, save_summaries_steps/secs, log_step_count_steps); a program
// may also add them itself, with its own EventWriter.
//
// Called from the training loop's thread only (as every SessionRunHook);
// the writer may be shared with other threads (it is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "distflow/export.h"
#include "distflow/train/event_writer.h"
#include "distflow/train/supervisor.h"

namespace distflow {

// Both read time through the session's clock (MonitoredSession::env()).

// Fetches `summary_op` (a serialized Summary, e.g. MergeSummary's output)
// with a step every `every_steps` global steps or every `every` (either may
// be 0: off), the first step always, and writes it at the global step after
// that step.
class DISTFLOW_EXPORT SummarySaverHook : public SessionRunHook {
 public:
  SummarySaverHook(std::shared_ptr<EventWriter> writer, Output summary_op, int64_t every_steps,
                   absl::Duration every = absl::ZeroDuration());
  absl::Status AfterCreateSession(MonitoredSession* session) override;
  std::vector<Output> BeforeRun() override;
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;
  absl::Status End(MonitoredSession* session) override;

 private:
  std::shared_ptr<EventWriter> writer_;
  Output summary_op_;
  int64_t every_steps_;
  absl::Duration every_;
  int64_t global_step_ = -1;  // as of the last step
  int64_t last_saved_step_ = -1;
  absl::Time last_saved_time_ = absl::InfinitePast();
  bool requested_ = false;
  Env* env_ = nullptr;  // the session's clock, from AfterCreateSession
};

// Writes "global_step/sec", the global steps per second since the last
// write, every `every_steps` global steps.
class DISTFLOW_EXPORT StepCounterHook : public SessionRunHook {
 public:
  StepCounterHook(std::shared_ptr<EventWriter> writer, int64_t every_steps, std::string tag = "global_step/sec");
  absl::Status AfterCreateSession(MonitoredSession* session) override;
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;
  absl::Status End(MonitoredSession* session) override;

 private:
  std::shared_ptr<EventWriter> writer_;
  int64_t every_steps_;
  std::string tag_;
  int64_t last_step_ = -1;
  absl::Time last_time_;
};

}  // namespace distflow
