// ProgressHook: a training progress line.
//
//   global step 1200/5000 (24%) | 31.2 steps/s | 1560 examples/s | loss 0.4121 | ETA 2m2s
//
// On a terminal the line is redrawn in place (carriage return) a few times a
// second and ended with a newline when training stops; when the output is
// not a terminal (a log file, a pipe, CI) a plain line is printed every
// `plain_every` instead, so logs stay readable. Rates are measured over the
// time since the previous line (the final line: over the whole run); the ETA
// assumes the current rate.
//
//   hooks.push_back(std::make_unique<ProgressHook>(ProgressOptions{
//       .last_step = 5000, .examples_per_step = 50, .loss = loss}));
//
// Called from the training loop's thread only (as every SessionRunHook).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "distflow/export.h"
#include "distflow/train/supervisor.h"

namespace distflow {

struct DISTFLOW_EXPORT ProgressOptions {
  // The global step training stops at (0: unknown, no percentage or ETA).
  int64_t last_step = 0;
  // Examples one global step consumes (batch size, times the replicas
  // aggregated in synchronous training); 0 leaves examples/s out.
  int64_t examples_per_step = 0;
  // A scalar loss fetched with each step (invalid: no loss shown).
  Output loss;
  FILE* out = stdout;
  // -1: decide by isatty(out); 0: plain lines; 1: redraw in place.
  int terminal = -1;
  absl::Duration redraw_every = absl::Milliseconds(250);
  absl::Duration plain_every = absl::Seconds(10);
};

class DISTFLOW_EXPORT ProgressHook : public SessionRunHook {
 public:
  explicit ProgressHook(ProgressOptions options);
  std::vector<Output> BeforeRun() override;
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;
  absl::Status End(MonitoredSession* session) override;

  // Before other output to the same terminal: erases the drawn line, which
  // the next redraw puts back below that output. Does nothing off a terminal.
  void ClearLine();
  // Prints the final line (with a newline) now rather than at End; once.
  void Finish();

  // The line for these numbers (without newline or carriage return).
  static std::string FormatLine(int64_t step, int64_t last_step, double steps_per_sec, double examples_per_sec,
                                const double* loss, bool show_examples);

 private:
  void Print(int64_t step, const double* loss, bool final_line);
  absl::Time Now() const;

  ProgressOptions options_;
  bool terminal_;
  absl::Time last_print_ = absl::InfinitePast();
  int64_t last_step_ = -1;
  int64_t first_step_ = -1;  // the step and time the clock started at
  absl::Time first_time_ = absl::InfinitePast();
  double rate_ = 0;
  int64_t step_ = -1;
  double loss_ = 0;
  bool have_loss_ = false;
  size_t drawn_width_ = 0;
  bool finished_ = false;
  Env* env_ = nullptr;  // the session's clock (MonitoredSession::env()), from the first AfterRun
};

// ScalarSummaryHook: fetches scalars with each step and reports them, by
// global step, to the process's metrics registry (base/metrics.h), where the
// status page draws them as curves and /metrics exports their last values.
//
//   hooks.push_back(std::make_unique<ScalarSummaryHook>(
//       std::vector<std::pair<std::string, Output>>{{"loss", loss}, {"accuracy", accuracy}}));
//
// `every_n_steps` > 1 reports only when the global step crosses a multiple
// of it. Values that are not scalars are skipped.
class DISTFLOW_EXPORT ScalarSummaryHook : public SessionRunHook {
 public:
  explicit ScalarSummaryHook(std::vector<std::pair<std::string, Output>> scalars, int64_t every_n_steps = 1);
  std::vector<Output> BeforeRun() override;
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;

 private:
  std::vector<std::pair<std::string, Output>> scalars_;
  const int64_t every_;
  int64_t last_reported_ = -1;
};

}  // namespace distflow
